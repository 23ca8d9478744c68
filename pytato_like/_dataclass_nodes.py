"""Node classes declared as :mod:`dataclasses`, as pytato declares them.

pytato's node classes are frozen dataclasses, and its users write new ones
the same way::

    @dataclasses.dataclass(frozen=True, eq=False, repr=False)
    class Scale(_SuppliedAxesAndTagsMixin, Array):
        array: Array
        factor: float
        _mapper_method: ClassVar[str] = "map_scale"

        @property
        def shape(self): return self.array.shape
        @property
        def dtype(self): return self.array.dtype

or subclass a node class with extra fields. Here the built-in node classes
are plain classes with ``__slots__`` and a ``_fields`` table (faster to
build); this module lets such dataclasses work anyway:

- every node class answers :func:`dataclasses.fields` from its
  ``_fields`` (then ``axes``, ``tags``, ``non_equality_tags``, keyword-only),
  so ``@dataclasses.dataclass`` on a subclass sees the inherited fields and
  generates a constructor taking them (:class:`_DataclassSpec`);
- the generated constructor ends in ``Array.__post_init__``, which is
  :func:`finish_dataclass_node`: the first time for a class it derives the
  class's ``_fields`` from its dataclass fields (the kind of each from its
  annotation, see :func:`field_kind`), then it normalizes shape, dtype, axes
  and tags as the built-in constructors do and computes the hash once.

Everything generic over ``_fields`` (equality, hashing, copying, pickling,
every mapper, code generation through ``to_index_lambda``) then works for
the user's class. A dataclass-generated ``__eq__``, ``__hash__`` or
``__repr__`` (``eq=True`` or ``repr=True``, the decorator's defaults) is
replaced by :class:`~pytato_like.array.Array`'s, which neither recurse nor
compare DAGs in exponential time.

The mixins :class:`~pytato_like.array._SuppliedAxesAndTagsMixin` and
:class:`~pytato_like.array._SuppliedShapeAndDtypeMixin` live in
:mod:`pytato_like.array`, as pytato's do. Importing this module installs
the protocol on :class:`~pytato_like.array.Array`
(:func:`install_dataclass_protocol`).

.. autodata:: ANY
.. autofunction:: field_kind
"""

from __future__ import annotations

import dataclasses
import operator
import re
import sys
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from constantdict import constantdict
from pytools.tag import normalize_tags

from pytato_like.array import (
    HASH_GETTERS,
    NO_TAGS,
    ARRAY,
    SHAPE,
    VALUE,
    Array,
    FieldKind,
    created_at_tags,
    default_axes,
    make_hash_getter,
    unique_tags,
    normalize_shape,
)
from pytato_like.diagnostic import AxisError, NotAnArrayError

from pytato_like import array as _array  # (ENABLE_TRACEBACK_TAG changes)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: the fields every node has besides its own (keyword-only in constructors)
_META_FIELDS = ("axes", "tags", "non_equality_tags")


# {{{ the field kind of values with arrays anywhere at their top level

class _AnyKind(FieldKind[object]):
    """Arrays in the value itself, in the entries of a tuple, or in the
    values of a mapping (one level: nested containers are values). The
    kind of a dataclass field whose annotation does not say it holds no
    arrays."""

    __slots__ = ()
    holds_arrays = True

    def arrays(self, value: object) -> Sequence[Array]:
        if isinstance(value, Array):
            return (value,)
        if isinstance(value, tuple):
            return [v for v in value if isinstance(v, Array)]
        if isinstance(value, Mapping):
            return [v for v in value.values() if isinstance(v, Array)]
        return ()

    def map(self, value: object, fn, array_type: type | None = None) -> object:
        t = Array if array_type is None else array_type
        if isinstance(value, t):
            return fn(value)
        if isinstance(value, tuple):
            if not any(isinstance(v, t) for v in value):
                return value
            new = [fn(v) if isinstance(v, t) else v for v in value]
            if all(map(operator.is_, new, value)):
                return value
            return tuple(new) if type(value) is tuple else type(value)(*new)
        if isinstance(value, Mapping):
            if not any(isinstance(v, t) for v in value.values()):
                return value
            items = {k: fn(v) if isinstance(v, t) else v
                     for k, v in value.items()}
            if all(items[k] is v for k, v in value.items()):
                return value
            try:
                return type(value)(items)  # type: ignore[call-arg]
            except TypeError:
                return constantdict(items)
        return value

    def canonical(self, value: object, fn) -> object:
        if isinstance(value, Array):
            return fn(value)
        if isinstance(value, tuple):
            return tuple(fn(v) if isinstance(v, Array) else v for v in value)
        if isinstance(value, Mapping):
            try:
                keys = sorted(value)
            except TypeError:
                keys = list(value)
            return tuple((k, fn(value[k]) if isinstance(value[k], Array)
                          else value[k]) for k in keys)
        return value

    @staticmethod
    def _pair_one(a: object, b: object, pairs: list) -> bool:
        if isinstance(a, Array):
            if not isinstance(b, Array):
                return False
            pairs.append((a, b))
            return True
        if isinstance(b, Array):
            return False
        return bool(a == b)

    def pair(self, a: object, b: object, pairs: list) -> bool:
        if isinstance(a, tuple) and isinstance(b, tuple):
            return len(a) == len(b) and all(
                self._pair_one(va, vb, pairs) for va, vb in zip(a, b))
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            return a.keys() == b.keys() and all(
                self._pair_one(a[k], b[k], pairs) for k in a)
        return self._pair_one(a, b, pairs)

    def slots(self, value: object) -> tuple:
        if isinstance(value, Array):
            return ((None, value),)
        if isinstance(value, tuple):
            return tuple((i, v) for i, v in enumerate(value)
                         if isinstance(v, Array))
        if isinstance(value, Mapping):
            return tuple((k, v) for k, v in value.items()
                         if isinstance(v, Array))
        return ()


#: A field holding an array, a tuple with arrays among its entries, a
#: mapping with arrays among its values, or no array at all (decided per
#: value).
ANY = _AnyKind("any")

_VALUE_TYPES = (int, float, complex, str, bool, bytes, type(None), np.dtype,
                np.generic, type)
_VALUE_TEXT = re.compile(
    r"(int|float|complex|str|bool|bytes|None|(np|numpy)\.(dtype|\w+\d+)\b.*"
    r"|type\b.*|ClassVar\b.*)")


def field_kind(cls: type, field: dataclasses.Field) -> FieldKind:
    """The kind of dataclass *field* of node class *cls*: ``SHAPE`` for a
    field named ``shape``; ``ARRAY`` when annotated with an
    :class:`~pytato_like.array.Array` class; ``VALUE`` when annotated with a
    type that holds no arrays (``int``, ``float``, ``str``, ``bool``, a
    NumPy dtype or scalar type, ...); :data:`ANY` otherwise (also when the
    annotation cannot be evaluated)."""
    if field.name == "shape":
        return SHAPE
    annotation = field.type
    if isinstance(annotation, str):
        text = annotation.strip()
        owner = next((k for k in cls.__mro__
                      if field.name in k.__dict__.get("__annotations__", {})),
                     cls)
        module = sys.modules.get(owner.__module__)
        namespace = dict(vars(module)) if module is not None else {}
        try:
            annotation = eval(text, namespace, dict(vars(owner)))  # noqa: S307
        except Exception:  # noqa: BLE001 (names only known to type checkers)
            return VALUE if _VALUE_TEXT.fullmatch(text) else ANY
    if isinstance(annotation, type):
        if issubclass(annotation, Array):
            return ARRAY
        if issubclass(annotation, _VALUE_TYPES):
            return VALUE
        return ANY
    import typing
    origin = typing.get_origin(annotation)
    if isinstance(origin, type) and issubclass(origin, (np.dtype, type)):
        return VALUE
    return ANY

# }}}


# {{{ node classes as dataclasses

class _DataclassSpec:
    """``__dataclass_fields__`` / ``__dataclass_params__`` of a node class
    that declares ``_fields``: its fields (in ``_fields`` order, no
    defaults), then keyword-only ``axes``, ``tags`` and
    ``non_equality_tags`` (with defaults), frozen as pytato's. Built on
    first use (a user's ``@dataclasses.dataclass`` on a subclass asks);
    classes without ``_fields`` have none, like :class:`~pytato_like.array.Array`.
    A class made a dataclass by the decorator has its own entry, which comes
    first."""

    # (the params are a dataclasses._DataclassParams, a private class)
    _specs: ClassVar[dict[type, tuple[dict[str, dataclasses.Field], object]]] = {}

    def __init__(self, params: bool) -> None:
        self.params = params

    def __get__(self, obj: object, owner: type | None = None) -> object:
        cls = type(obj) if owner is None else owner
        spec = self._specs.get(cls)
        if spec is None:
            fields = getattr(cls, "_fields", None)
            if fields is None:
                raise AttributeError("__dataclass_fields__")
            namespace: dict[str, object] = {"__annotations__": {
                **{name: Any for name, _ in fields},
                **dict.fromkeys(_META_FIELDS, Any)}}
            namespace["axes"] = dataclasses.field(kw_only=True, default=None)
            namespace["tags"] = dataclasses.field(kw_only=True,
                                                  default=NO_TAGS)
            namespace["non_equality_tags"] = dataclasses.field(
                kw_only=True, default=NO_TAGS, compare=False, hash=False)
            template: Any = dataclasses.dataclass(
                frozen=True, eq=False, repr=False, init=False)(
                    type(cls.__name__, (), namespace))
            spec = (template.__dataclass_fields__,
                    template.__dataclass_params__)
            self._specs[cls] = spec
        return spec[1] if self.params else spec[0]


def install_dataclass_protocol(array_cls: type) -> None:
    """Let the node classes under *array_cls* answer
    :func:`dataclasses.fields` (see :class:`_DataclassSpec`), and end the
    constructors ``@dataclasses.dataclass`` generates for them in
    :func:`finish_dataclass_node` (their ``__post_init__``)."""
    array_cls.__post_init__ = finish_dataclass_node  # type: ignore[attr-defined]
    array_cls.__dataclass_fields__ = _DataclassSpec(params=False)  # type: ignore[attr-defined]
    array_cls.__dataclass_params__ = _DataclassSpec(params=True)  # type: ignore[attr-defined]


class _Plan:
    """What :func:`finish_dataclass_node` does for one dataclass node class
    (worked out once, by :func:`_prepare`)."""

    __slots__ = ("base", "computed", "dtype_field", "hash_getter", "name",
                 "shape_field")

    def __init__(self, cls: type, base: type | None,
                 computed: tuple[str, ...]) -> None:
        fields = cls.__dataclass_fields__  # type: ignore[attr-defined]
        self.name = cls.__name__
        #: the built-in node class whose constructor computes the derived
        #: attributes, or None
        self.base = base
        self.shape_field = "shape" in fields
        self.dtype_field = "dtype" in fields
        #: the user's shape/dtype properties, computed once per node
        self.computed = computed
        self.hash_getter = HASH_GETTERS.get(cls) or make_hash_getter(cls)


_PLANS: dict[type, _Plan] = {}


class _ComputedOnce:
    """Replaces a user's ``shape`` or ``dtype`` property: computed once per
    node, at construction, then read from the instance. A property reading
    its operand's ``shape`` would otherwise recurse through every node below
    (a chain of 100 000 such nodes overflows the stack); built bottom-up,
    each node finds its operands' values stored."""

    def __init__(self, fget: Callable[[Array], object], name: str) -> None:
        self.fget = fget
        self.name = name
        self.__doc__ = getattr(fget, "__doc__", None)

    def __get__(self, obj: Array | None, owner: type | None = None) -> object:
        if obj is None:
            return self
        value = self.fget(obj)
        obj.__dict__[self.name] = value  # (shadows this non-data descriptor)
        return value


def _is_generated(cls: type, name: str) -> bool:
    fn = cls.__dict__.get(name)
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_filename == "<string>"


def _prepare(cls: type) -> _Plan:
    """Derive *cls*'s ``_fields`` from its dataclass fields, check it is a
    usable node class, and replace generated ``__eq__``/``__hash__``/
    ``__repr__``; returns its :class:`_Plan`."""
    name = cls.__name__
    if not isinstance(getattr(cls, "_mapper_method", None), str):
        raise NotAnArrayError(
            f"{name} subclasses Array without a _mapper_method (the name "
            "of the mapper method that handles it, e.g. 'map_my_array')")
    base: type | None = next((b for b in cls.__mro__[1:]
                 if isinstance(b, type) and issubclass(b, Array)
                 and b is not Array
                 and "__dataclass_fields__" not in b.__dict__
                 and getattr(b, "_fields", None) is not None), None)
    if "_fields" not in cls.__dict__:
        inherited = dict(getattr(cls, "_fields", None) or ())
        fields = []
        for field in dataclasses.fields(cls):
            if not field.init or field.name in _META_FIELDS:
                continue
            kind = inherited.get(field.name) or field_kind(cls, field)
            fields.append((field.name, kind))
        cls._fields = tuple(fields)  # type: ignore[attr-defined]
    computed = []
    for attr_name in ("shape", "dtype"):
        attr = next((k.__dict__[attr_name] for k in cls.__mro__
                     if attr_name in k.__dict__), None)
        if isinstance(attr, property) and attr.fget is not None:
            attr = _ComputedOnce(attr.fget, attr_name)
            setattr(cls, attr_name, attr)
        if isinstance(attr, _ComputedOnce):
            computed.append(attr_name)
    for method in ("__eq__", "__hash__", "__repr__"):
        if _is_generated(cls, method):
            setattr(cls, method, getattr(Array, method))
    plan = _PLANS[cls] = _Plan(cls, base, tuple(computed))
    return plan


def _slot_names(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in names and slot not in (
                    "_hash", "__dict__", "__weakref__"):
                names.append(slot)
    return names


def _settable(cls: type, name: str) -> bool:
    """Whether attribute *name* of *cls* instances is stored (not a property
    of the user's class)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            return isinstance(attr, types.MemberDescriptorType) or not hasattr(
                attr, "__get__")
    return True


def finish_dataclass_node(self: Array) -> None:
    """Complete a node built by a dataclass-generated constructor: normalize
    shape, dtype, axes and tags as the built-in constructors do (through
    the built-in base class's constructor when the node's class derives
    from one) and compute its hash once."""
    cls = type(self)
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _prepare(cls)
    put = object.__setattr__
    axes = getattr(self, "axes", None)
    tags = getattr(self, "tags", NO_TAGS)
    non_equality_tags = getattr(self, "non_equality_tags", NO_TAGS)
    if type(tags) is not frozenset:
        tags = normalize_tags(tags)
    if tags:
        unique_tags(tags, plan.name)
    if type(non_equality_tags) is not frozenset:
        non_equality_tags = normalize_tags(non_equality_tags)
    if _array.ENABLE_TRACEBACK_TAG:
        non_equality_tags = created_at_tags(non_equality_tags)
    base = plan.base
    if base is not None:
        values = {name: getattr(self, name)
                  for name, _ in base._fields}  # type: ignore[attr-defined]
        if "shape" in values:  # as make_placeholder etc. pass them
            values["shape"] = normalize_shape(values["shape"])
        if "dtype" in values:
            values["dtype"] = np.dtype(values["dtype"])
        # (not every base takes non_equality_tags: set below)
        model = base(**values, axes=axes, tags=tags)
        for name in _slot_names(base):
            if hasattr(model, name) and _settable(cls, name):
                put(self, name, getattr(model, name))
        for name, value in getattr(model, "__dict__", {}).items():
            if _settable(cls, name):
                put(self, name, value)
        axes = self.axes
    else:
        if plan.shape_field:
            put(self, "shape", normalize_shape(self.shape))
        if plan.dtype_field:
            put(self, "dtype", np.dtype(self.dtype))
        try:
            for name in plan.computed:  # the user's properties, once
                getattr(self, name)
            shape = self.shape
            self.dtype  # noqa: B018 (must exist)
        except AttributeError as err:
            if "shape" in str(err) or "dtype" in str(err):
                raise NotAnArrayError(
                    f"{plan.name} has no shape or dtype: declare them as "
                    "fields (e.g. with _SuppliedShapeAndDtypeMixin) or "
                    "properties") from None
            raise
        if axes is None:
            axes = default_axes(len(shape))
        else:
            axes = tuple(axes)
            if len(axes) != len(shape):
                raise AxisError(f"{plan.name} of shape {shape} got "
                                f"{len(axes)} axes metadata entries")
        put(self, "axes", axes)
    put(self, "tags", tags)
    put(self, "non_equality_tags", non_equality_tags)
    put(self, "_hash", hash((cls, plan.hash_getter(self), axes, tags)))

# }}}


install_dataclass_protocol(Array)

# vim: foldmethod=marker
