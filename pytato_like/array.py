"""The array expression graph: node classes and input constructors.

A program is an immutable DAG of :class:`Array` nodes. Each node stores its
defining fields, its ``shape``, ``dtype``, ``axes`` and ``tags``, and a hash
computed once at construction from those fields and its children's cached
hashes, so hashing is O(1) per node. Equality, pickling and ``repr`` walk the
DAG with explicit stacks (see :mod:`pytato_like._traversal`), never with
recursion, so DAGs of any depth work at the default recursion limit.

The NumPy-style operators and methods of :class:`Array` are implemented in
:mod:`pytato_like._frontend` and friends; this module only owns the IR.
Python's operators, NumPy's protocols and the dataclass protocol are
installed on :class:`Array` by :mod:`pytato_like._frontend`,
:mod:`pytato_like._numpy_interop` and :mod:`pytato_like._dataclass_nodes`,
which build on this module (``import pytato_like`` imports them right
after it), so that no module below them imports them back. The methods
(``.T``, :meth:`~Array.reshape`, :meth:`~Array.sum`, indexing, ...),
equality, pickling and printing call their functions through the table
:data:`FRONT_END` (a :class:`FrontEndOperations`), which
:mod:`pytato_like` fills: this module imports none of the modules that
build on it, not even inside a function.

.. autoclass:: FrontEndOperations
.. autodata:: FRONT_END

Node classes
------------

.. autoclass:: Array
    :members: shape, dtype, ndim, size, T, tagged, without_tags,
        tags_of_type, tags_not_of_type, with_tagged_axis, copy, reshape,
        sum, max, min, prod, any, all, astype
.. autoclass:: Axis
.. autoclass:: ReductionDescriptor
.. autoclass:: InputArgumentBase
.. autoclass:: Placeholder
.. autoclass:: DataWrapper
.. autoclass:: SizeParam
.. autoclass:: IndexLambda
    :members: with_tagged_reduction
.. autoclass:: EinsumAxisDescriptor
.. autoclass:: EinsumElementwiseAxis
.. autoclass:: EinsumReductionAxis
.. autoclass:: Einsum
.. autoclass:: IndexRemappingBase
.. autoclass:: Reshape
.. autoclass:: AxisPermutation
.. autoclass:: Concatenate
.. autoclass:: Stack
.. autoclass:: Roll
.. autoclass:: NormalizedSlice
.. autoclass:: IndexBase
.. autoclass:: BasicIndex
.. autoclass:: AdvancedIndexInContiguousAxes
.. autoclass:: AdvancedIndexInNoncontiguousAxes
.. autoclass:: AbstractResultWithNamedArrays
.. autoclass:: DictOfNamedArrays
.. autoclass:: NamedArray
.. autoclass:: _SuppliedAxesAndTagsMixin
.. autoclass:: _SuppliedShapeAndDtypeMixin

Constructors
------------

.. autofunction:: make_placeholder
.. autofunction:: make_data_wrapper
.. autofunction:: make_size_param
.. autofunction:: make_dict_of_named_arrays
.. autofunction:: set_traceback_tag_enabled
.. autodata:: SUPPORTED_DTYPES
.. autofunction:: supported_dtype

Types
-----

.. autoclass:: DataInterface
.. data:: ShapeType

    A shape: a tuple of shape components (non-negative :class:`int` and
    0-dimensional integer arrays of size parameters).

.. data:: AxesT

    The axes metadata of an array: a tuple of :class:`Axis`, one per
    dimension.

Helpers pytato's own tests import from ``pytato.array`` are here under the
same names: ``_get_default_axes(ndim)`` (*ndim* untagged axes),
``_get_default_tags(existing_tags=None)`` (the tags every new array starts
with: none; where an array was created goes to
:attr:`Array.non_equality_tags`), ``_np_result_dtype(*arrays_and_dtypes)``
(:func:`numpy.result_type`, lazy arrays taken by their dtype) and
``Array._hash_value`` (the hash, computed once at construction).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Generic,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
    runtime_checkable,
)

import numpy as np
from constantdict import constantdict
from pytools.tag import (
    NonUniqueTagError,
    Tag,
    Taggable,
    check_tag_uniqueness,
    normalize_tags,
)

from pytato_like.diagnostic import (
    ArrayTooLargeError,
    AxisError,
    DTypeError,
    EinsumSpecError,
    InvalidNameError,
    InvalidOperandError,
    NotAReductionAxis,
    NotAnArrayError,
    ShapeMismatchError,
    TagNotPresentError,
)
from pytato_like.diagnostic import NonUniqueTagError as DiagnosticNonUniqueTagError
from pytato_like.tags import CreatedAt, CreationStack

if TYPE_CHECKING:
    from collections.abc import Sequence

    from typing_extensions import Self

    from numpy.typing import ArrayLike

    from pytato_like.dtype import DTypeLike

    #: one length of a shape: an int or a 0-d integer size expression
    ShapeArgComponent: TypeAlias = "int | np.integer | Array"
    #: a shape: one length or a sequence of lengths (ints or size expressions)
    ShapeArg = int | Sequence[ShapeArgComponent]
    #: tags: one tag or several
    TagsArg = Tag | Iterable[Tag]
    #: the axes to reduce or squeeze: one, several, or None for all
    AxisArg = int | Sequence[int] | None
    #: what an operator takes beside an array: an array, a number, or a
    #: NumPy array, list or tuple of numbers (wrapped as data); anything
    #: else raises InvalidOperandError
    Operand: TypeAlias = ("Array | int | float | complex | np.generic"
                          " | np.ndarray | list | tuple")

# {{{ field kinds

#: the type of the values of one field kind
FieldValueT = TypeVar("FieldValueT")

# Each node class lists its constructor fields with a *kind* saying where
# arrays may sit inside the value. The kinds below are the one place that
# knows those layouts: children, copying, equality, pickling, cache keys,
# stringifying and description all go through their four methods. A kind
# is a str (its name), so tables may still compare kinds with ``is``.

class FieldKind(str, Generic[FieldValueT]):
    """How arrays sit inside a field value (the base: none do).

    .. attribute:: holds_arrays

        Whether values of this kind can contain arrays.

    .. attribute:: by_identity

        Whether the (array-free) value is compared and hashed by identity.
    """

    __slots__ = ()
    holds_arrays = False
    by_identity = False

    def arrays(self, value: FieldValueT) -> Sequence[Array]:
        """The arrays in *value*, in order (bindings in insertion order)."""
        return ()

    def map(self, value: FieldValueT, fn, array_type: type | None = None
            ) -> FieldValueT:
        """*value* with every array *a* inside replaced by ``fn(a)``; the
        same object when nothing changed. *array_type* says which entries
        of a mixed tuple are arrays (by default :class:`Array`; another
        type when mapping stand-ins)."""
        return value

    def canonical(self, value: FieldValueT, fn) -> object:
        """*value* with every array *a* replaced by ``fn(a)``, bindings as a
        tuple sorted by name, a value compared by identity as its ``id``:
        equal for equal values when *fn* is (keys are built from it)."""
        return id(value) if self.by_identity else value

    def pair(self, a: FieldValueT, b: FieldValueT, pairs: list) -> bool:
        """Whether field values *a* and *b* are equal but for their arrays;
        if so, their arrays, position by position, are added to *pairs*."""
        return a is b if self.by_identity else a == b

    def slots(self, value: FieldValueT) -> tuple:
        """``(slot, array)`` for each array in *value*: the slot is None for
        a single array, the position in a tuple, the name in bindings."""
        return ()


class _IdentityKind(FieldKind[object]):
    __slots__ = ()
    by_identity = True


class _ArrayKind(FieldKind["Array"]):
    __slots__ = ()
    holds_arrays = True

    def arrays(self, value: Array) -> tuple:
        return (value,)

    def map(self, value: Array, fn, array_type: type | None = None
            ) -> Array:
        return fn(value)

    def canonical(self, value: Array, fn) -> object:
        return fn(value)

    def pair(self, a: Array, b: Array, pairs: list) -> bool:
        pairs.append((a, b))
        return True

    def slots(self, value: Array) -> tuple:
        return ((None, value),)


class _ArrayTupleKind(FieldKind["tuple[Array, ...]"]):
    __slots__ = ()
    holds_arrays = True

    def arrays(self, value: tuple[Array, ...]) -> tuple:
        return value

    def map(self, value: tuple[Array, ...], fn, array_type: type | None = None
            ) -> tuple[Array, ...]:
        new = tuple(fn(a) for a in value)
        return value if all(map(operator.is_, new, value)) else new

    def canonical(self, value: tuple[Array, ...], fn) -> object:
        return tuple(fn(a) for a in value)

    def pair(self, a: tuple[Array, ...], b: tuple[Array, ...], pairs: list) -> bool:
        if len(a) != len(b):
            return False
        pairs.extend(zip(a, b))
        return True

    def slots(self, value: tuple[Array, ...]) -> tuple:
        return tuple(enumerate(value))


class _BindingsKind(FieldKind["Mapping[str, Array]"]):
    __slots__ = ()
    holds_arrays = True

    def arrays(self, value: Mapping[str, Array]) -> tuple:
        return tuple(value.values())

    def map(self, value: Mapping[str, Array], fn, array_type: type | None = None
            ) -> Mapping[str, Array]:
        new = {}
        changed = False
        for k, a in value.items():
            new_a = new[k] = fn(a)
            changed = changed or new_a is not a
        return constantdict(new) if changed else value

    def canonical(self, value: Mapping[str, Array], fn) -> object:
        # constantdict equality ignores insertion order; so does this
        return tuple((k, fn(value[k])) for k in sorted(value))

    def pair(self, a: Mapping[str, Array], b: Mapping[str, Array], pairs: list) -> bool:
        if a.keys() != b.keys():
            return False
        pairs += [(a[k], b[k]) for k in a]
        return True

    def slots(self, value: Mapping[str, Array]) -> tuple:
        return tuple(value.items())


class _MixedKind(FieldKind["tuple"]):
    """A tuple of arrays mixed with ints, slices and None."""

    __slots__ = ()
    holds_arrays = True

    def arrays(self, value: tuple) -> list[Array]:
        return [v for v in value if type(v) is not int and isinstance(v, Array)]

    def map(self, value: tuple, fn, array_type: type | None = None
            ) -> tuple:
        t = Array if array_type is None else array_type
        # mostly ints and slices: look before building a new tuple
        for v in value:
            if isinstance(v, t):
                break
        else:
            return value
        new = tuple(fn(v) if isinstance(v, t) else v for v in value)
        return value if all(map(operator.is_, new, value)) else new

    def canonical(self, value: tuple, fn) -> object:
        return tuple(fn(v) if isinstance(v, Array) else v for v in value)

    def pair(self, a: tuple, b: tuple, pairs: list) -> bool:
        if len(a) != len(b):
            return False
        for va, vb in zip(a, b):
            if type(va) is int:     # (most entries: a size)
                if type(vb) is not int or va != vb:
                    return False
            elif isinstance(va, Array):
                if not isinstance(vb, Array):
                    return False
                pairs.append((va, vb))
            elif isinstance(vb, Array) or va != vb:
                return False
        return True

    def slots(self, value: tuple) -> tuple:
        return tuple((i, v) for i, v in enumerate(value) if isinstance(v, Array))


#: no arrays inside (str, dtype, ...)
VALUE: FieldKind[object] = FieldKind("value")
IDENTITY = _IdentityKind("identity")    # compared by ``is`` (wrapped data)
ARRAY = _ArrayKind("array")             # a single Array
ARRAY_TUPLE = _ArrayTupleKind("arrays")  # tuple of Arrays
BINDINGS = _BindingsKind("bindings")    # Mapping[str, Array]
SHAPE = _MixedKind("shape")             # tuple of int | Array
INDICES = _MixedKind("indices")  # tuple of int | NormalizedSlice | Array | None


def map_arrays_in_field(value: FieldValueT, kind: FieldKind[FieldValueT],
                        fn) -> FieldValueT:
    """*value* (a field of kind *kind*) with every array inside replaced by
    ``fn(array)``; the same object when nothing changed."""
    return kind.map(value, fn)

# }}}


# {{{ metadata: axes and reduction descriptors

class _TaggableMixin(Taggable):
    """:class:`pytools.tag.Taggable` whose ``tags_of_type`` and
    ``tags_not_of_type`` are not memoized: pytools keeps the memo in the
    instance, where it would be pickled with it (and a locally defined tag
    class cannot be)."""

    __slots__ = ()

    def tags_of_type(self, tag_t: type) -> frozenset:
        """The tags that are instances of *tag_t*."""
        return frozenset(t for t in self.tags if isinstance(t, tag_t))

    def tags_not_of_type(self, tag_t: type) -> frozenset:
        """The tags that are not instances of *tag_t*."""
        return frozenset(t for t in self.tags if not isinstance(t, tag_t))


@dataclasses.dataclass(frozen=True)
class Axis(_TaggableMixin):
    """Metadata of one array axis: a set of tags. A
    :class:`pytools.tag.Taggable` (``tagged``, ``without_tags``,
    ``tags_of_type``, ``tags_not_of_type`` as pytools defines them)."""

    tags: frozenset[Tag] = frozenset()

    def _with_new_tags(self, tags: frozenset[Tag]) -> Axis:
        return Axis(tags)


@dataclasses.dataclass(frozen=True)
class ReductionDescriptor(_TaggableMixin):
    """Metadata of one reduction axis: a set of tags. A
    :class:`pytools.tag.Taggable` like :class:`Axis`."""

    tags: frozenset[Tag] = frozenset()

    def _with_new_tags(self, tags: frozenset[Tag]) -> ReductionDescriptor:
        return ReductionDescriptor(tags)


NO_TAGS: frozenset[Tag] = frozenset()


# {{{ creation tracebacks

# Read by every constructor: a plain module global is the cheapest test
# when the feature is off (the default).
ENABLE_TRACEBACK_TAG = False


def set_traceback_tag_enabled(enable: bool = True) -> None:
    """Record (or stop recording) where each new array is created: when
    enabled, every array built afterwards carries a
    :class:`~pytato_like.tags.CreatedAt` tag in its
    :attr:`Array.non_equality_tags` (so hashing and equality ignore it)."""
    global ENABLE_TRACEBACK_TAG
    ENABLE_TRACEBACK_TAG = bool(enable)


def created_at_tags(non_equality_tags: frozenset[Tag]) -> frozenset[Tag]:
    """*non_equality_tags* plus a :class:`~pytato_like.tags.CreatedAt` tag for
    the calling user code, unless one is already there (copies keep the
    original creation site)."""
    if any(isinstance(t, CreatedAt) for t in non_equality_tags):
        return non_equality_tags
    return non_equality_tags | {CreatedAt(CreationStack.from_current_stack())}

# }}}
_DEFAULT_AXIS = Axis()
_DEFAULT_REDUCTION_DESCR = ReductionDescriptor()


@lru_cache(maxsize=256)
def default_axes(ndim: int) -> tuple[Axis, ...]:
    return (_DEFAULT_AXIS,) * ndim


#: The axes metadata of an array: one :class:`Axis` per dimension.
AxesT: TypeAlias = tuple[Axis, ...]


def _get_default_axes(ndim: int) -> AxesT:
    """*ndim* axes without tags (pytato's name)."""
    return default_axes(ndim)


def _get_default_tags(existing_tags: frozenset[Tag] | None = None
                      ) -> frozenset[Tag]:
    """The tags a new array starts with (pytato's name): none. Where the
    array was created is recorded in its
    :attr:`~Array.non_equality_tags` instead (see
    :func:`set_traceback_tag_enabled`), so *existing_tags* change nothing."""
    return NO_TAGS


# }}}


# {{{ the front end's operations

class FrontEndOperations:
    """The functions behind :class:`Array`'s NumPy-style methods (``.T``,
    :meth:`~Array.reshape`, :meth:`~Array.sum`, indexing, ...), its
    structural equality, pickling and printing, and the broadcasting rule
    the advanced-index nodes compute their shapes with.

    Those functions build on this module, so it cannot import them (not
    even inside a method: that makes an import cycle). :mod:`pytato_like`
    fills the one instance, :data:`FRONT_END`, right after importing the
    modules that define them, before any user code runs; a method reads
    one attribute of it per call.
    """

    # pytato_like._shape_ops, cmath, _indexing, _frontend, reductions,
    # _argreduce, _einsum (their signatures: the functions' own)
    transpose: Callable[..., Array]
    reshape: Callable[..., Array]
    squeeze: Callable[..., Array]
    real: Callable[[Array], Array]
    imag: Callable[[Array], Array]
    conj: Callable[[Array], Array]
    abs: Callable[[Array], Array]
    getitem: Callable[[Array, object], Array]
    astype: Callable[[Array, DTypeLike], Array]
    sum: Callable[..., Array]
    prod: Callable[..., Array]
    amax: Callable[..., Array]
    amin: Callable[..., Array]
    any: Callable[..., Array]
    all: Callable[..., Array]
    mean: Callable[..., Array]
    argmax: Callable[..., Array]
    argmin: Callable[..., Array]
    dot: Callable[..., Array]
    matmul: Callable[..., Array]
    # pytato_like._traversal
    structurally_equal: Callable[[Array, Array], bool]
    structurally_equal_many: Callable[[list[Array], list[Array]], bool]
    pickle_dag: Callable[[Array], tuple]
    flatten_dags: Callable[[list[Array]], tuple[list[tuple], list[int]]]
    unflatten_dags: Callable[[list[tuple], list[int]], list[Array]]
    # pytato_like.stringifier, pytato_like.visualization.notebook
    dag_repr: Callable[[Array | AbstractResultWithNamedArrays], str]
    dag_html: Callable[[Array | AbstractResultWithNamedArrays], str]
    # pytato_like._shapes
    get_shape_after_broadcasting: Callable[[Iterable[object]],
                                           tuple[ShapeComponent, ...]]

    if not TYPE_CHECKING:  # (type checkers keep reporting unknown names)
        def __getattr__(self, name: str):
            raise AttributeError(
                f"the front-end operation {name!r} is not registered yet: "
                "pytato_like registers them all when it is imported")


#: the front-end operations (see :class:`FrontEndOperations`)
FRONT_END = FrontEndOperations()

# }}}


# {{{ shape helpers

ShapeComponent = Any  # int | Array (0-d integer expression of SizeParams)

#: A shape: a tuple of shape components.
ShapeType: TypeAlias = tuple[ShapeComponent, ...]


@runtime_checkable
class DataInterface(Protocol):
    """What :func:`make_data_wrapper` needs of the data it wraps (pytato's
    protocol): a :attr:`shape` and a :attr:`dtype`. :class:`numpy.ndarray`
    and :class:`pyopencl.array.Array` have both; a target may ask for more
    (the NumPy target reads the values with :func:`numpy.asarray`).

    .. attribute:: shape
    .. attribute:: dtype
    """

    shape: ShapeType
    dtype: np.dtype


def _np_result_dtype(*arrays_and_dtypes: Array | ArrayLike | DTypeLike
                     ) -> np.dtype:
    """:func:`numpy.result_type` of *arrays_and_dtypes* (dtypes, scalars,
    NumPy arrays; a lazy :class:`Array` counts by its dtype): pytato's
    promotion helper."""
    return np.result_type(*(x.dtype if isinstance(x, Array) else x
                            for x in arrays_and_dtypes))


def _normalize_shape_component(s: object) -> ShapeComponent:
    if type(s) is int:
        if s < 0:
            raise ShapeMismatchError(f"negative dimension {s} in shape")
        return s
    if isinstance(s, (int, np.integer)) and not isinstance(s, bool):
        s = int(s)
        if s < 0:
            raise ShapeMismatchError(f"negative dimension {s} in shape")
        return s
    if isinstance(s, Array):
        if s.ndim != 0 or s.dtype.kind not in "iu":
            raise ShapeMismatchError(
                "a symbolic shape component must be a 0-dimensional integer "
                f"array expression, got shape {s.shape} dtype {s.dtype}")
        return s
    raise ShapeMismatchError(
        f"shape component {s!r} is neither an int nor an integer size expression")


def normalize_shape(shape: ShapeArg | ShapeArgComponent
                    ) -> tuple[ShapeComponent, ...]:
    """*shape* as a tuple of non-negative ints and 0-d integer arrays."""
    if isinstance(shape, (int, np.integer, Array)):
        shape = (shape,)
    result = tuple(_normalize_shape_component(s) for s in shape)
    if len(result) > 1:
        check_element_count(result)
    return result


def check_element_count(shape: tuple[ShapeComponent, ...]) -> None:
    """Raise :class:`~pytato_like.diagnostic.ArrayTooLargeError` when the
    concrete extents of *shape* multiply to more elements than an int64
    index addresses."""
    count = 1
    for s in shape:
        if type(s) is int:
            count *= s
    if count > _MAX_ELEMENTS:
        raise ArrayTooLargeError(
            f"shape {shape} has {count} elements, more than a 64-bit "
            f"index can address ({_MAX_ELEMENTS})")


#: the most elements an array may have: its flat indices are int64
_MAX_ELEMENTS = 2**63 - 1


def shape_product(shape: Iterable[ShapeComponent]) -> ShapeComponent:
    result: ShapeComponent = 1
    for s in shape:
        result = result * s
    return result


# }}}


# {{{ Array base

class Array(_TaggableMixin):
    """Base class of every array expression.

    Arrays are immutable and :class:`pytools.tag.Taggable`. ``==``
    compares two DAGs structurally (in time linear in their size);
    elementwise comparison is :func:`pytato_like.equal`.

    .. attribute:: shape
    .. attribute:: dtype
    .. attribute:: axes

        One :class:`Axis` per dimension.

    .. attribute:: tags

        A :class:`frozenset` of :class:`pytools.tag.Tag`.

    .. attribute:: non_equality_tags

        Tags kept with the array (and its copies) that take no part in
        equality or hashing, e.g. :class:`~pytato_like.tags.CreatedAt`.
    """

    # (Taggable has no __slots__: instances also get __dict__ and __weakref__)
    __slots__ = ("_hash", "axes", "dtype", "non_equality_tags", "shape", "tags")

    _mapper_method: ClassVar[str]
    #: ``(field_name, kind)`` of each constructor field except axes and tags.
    _fields: ClassVar[tuple[tuple[str, FieldKind], ...]]

    # __array__, __array_ufunc__ and __array_function__ (what NumPy may do
    # with a lazy array) are installed by pytato_like._numpy_interop, the
    # operators by pytato_like._frontend and __post_init__ (for node classes
    # declared as dataclasses) by pytato_like._dataclass_nodes: those modules
    # build on this one, and pytato_like imports them right after it. The
    # methods below call the front end's functions through FRONT_END.

    shape: tuple[ShapeComponent, ...]
    dtype: np.dtype
    axes: tuple[Axis, ...]
    tags: frozenset[Tag]

    def __init__(self, *args: object, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS,
                 **kwargs: object) -> None:
        """Generic constructor for user subclasses that declare
        :attr:`_fields` (``(name, kind)`` pairs; ``shape`` and ``dtype``
        among them, or given as properties) instead of writing their own:
        fields are taken by position or keyword, then *axes*, *tags* and
        *non_equality_tags* as for every node."""
        cls = type(self)
        fields = getattr(cls, "_fields", None)
        if fields is None:
            raise NotAnArrayError(
                f"{cls.__name__} subclasses Array without declaring _fields "
                "(the (name, kind) pairs of its constructor arguments) and "
                "is not a @dataclasses.dataclass(frozen=True, eq=False)")
        names = [name for name, _ in fields]
        if len(args) > len(names):
            raise NotAnArrayError(
                f"{cls.__name__} takes {len(names)} fields {names}, got "
                f"{len(args)} positional arguments")
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name not in names or name in values:
                raise NotAnArrayError(
                    f"{cls.__name__}: unexpected or repeated argument {name!r} "
                    f"(fields: {names})")
            values[name] = value
        missing = [name for name in names if name not in values]
        if missing:
            raise NotAnArrayError(f"{cls.__name__}: missing fields {missing}")
        for name in names:
            value = values[name]
            if name == "shape":
                value = normalize_shape(value)
            elif name == "dtype":
                value = np.dtype(value)
            setattr(self, name, value)
        self._finish_init(axes, tags, non_equality_tags)

    def _finish_init(self, axes, tags, non_equality_tags=NO_TAGS) -> None:
        """Store axes and tags and compute the hash. Called last by every
        subclass constructor. *non_equality_tags* are stored but take no
        part in the hash or in equality."""
        if axes is None:
            axes = default_axes(len(self.shape))
        elif len(axes) != len(self.shape):
            raise AxisError(
                f"{type(self).__name__} of shape {self.shape} got "
                f"{len(axes)} axes metadata entries")
        self.axes = axes
        self.tags = tags
        self.non_equality_tags = (
            created_at_tags(non_equality_tags) if ENABLE_TRACEBACK_TAG
            else non_equality_tags)
        cls = type(self)
        getter = HASH_GETTERS.get(cls)
        if getter is None:
            getter = make_hash_getter(cls)
        self._hash = hash((cls, getter(self), axes, tags))

    def _field_values(self) -> tuple:
        """The field values the hash is computed from (wrapped data by
        identity)."""
        getter = HASH_GETTERS.get(type(self)) or make_hash_getter(type(self))
        return getter(self)

    # {{{ identity

    def __hash__(self) -> int:
        return self._hash

    @property
    def _hash_value(self) -> int:
        # pytato's name of the cached hash (here computed at construction)
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Array) or self._hash != other._hash:
            return False
        return FRONT_END.structurally_equal(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __reduce__(self):
        return FRONT_END.pickle_dag(self)

    def __repr__(self) -> str:
        # the full text of a small DAG, a summary of a large one;
        # pytato_like.stringify(x) gives the full text of any
        return FRONT_END.dag_repr(self)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        # Jupyter: the summary, and a drawing of a small DAG
        return FRONT_END.dag_html(self)

    def __bool__(self) -> bool:
        raise DTypeError(
            f"the truth value of a lazy {type(self).__name__} of shape "
            f"{self.shape} is unknown until it is evaluated")

    def __len__(self) -> int:
        if not self.shape:
            raise DTypeError("len() of a 0-dimensional array")
        return self.shape[0]

    def __iter__(self):
        # Explicit, so that Python does not fall back to __getitem__ with
        # ever-growing integers.
        for i in range(len(self)):
            yield self[i]

    # }}}

    # {{{ construction helpers

    @classmethod
    def _constructor_field_names(cls) -> tuple[str, ...]:
        return (*(name for name, _ in cls._fields), "axes", "tags",
                "non_equality_tags")

    def copy(self, **kwargs: object) -> Self:
        """A new node of the same class with the given fields replaced."""
        cls = type(self)
        reader = _CONSTRUCTOR_READERS.get(cls)
        if reader is None:
            reader = _make_constructor_reader(cls)
        names, read = reader
        # (one attrgetter call per copy: copies are the hot path of every
        # rewriting pass)
        values = dict(zip(names, read(self)))
        values.update(kwargs)
        # Set after construction: they take no part in the hash, and user
        # subclasses written before non_equality_tags existed need not
        # accept the keyword.
        non_equality_tags = values.pop("non_equality_tags")
        new = type(self)(**values)
        if non_equality_tags or new.non_equality_tags:
            # (a user's frozen dataclass node refuses plain assignment)
            object.__setattr__(new, "non_equality_tags", non_equality_tags)
        return new

    def replace_if_different(self, **kwargs: object) -> Self:
        """Like :meth:`copy`, but returns *self* when every given field is
        identical to the stored one."""
        for name, value in kwargs.items():
            if getattr(self, name) is not value:
                return self.copy(**kwargs)
        return self

    # }}}

    # {{{ metadata

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> ShapeComponent:
        return shape_product(self.shape)

    def _with_new_tags(self, tags: frozenset[Tag]) -> Self:
        """A copy whose tags are exactly *tags* (pytools' Taggable hook)."""
        return self.copy(tags=tags)

    def tagged(self, tags) -> Self:
        """A copy with *tags* (a tag or an iterable of tags) added; *self*
        when they are all there already. Two tags of one
        :class:`~pytools.tag.UniqueTag` subclass raise
        :class:`~pytato_like.diagnostic.NonUniqueTagError` (a
        :class:`pytools.tag.NonUniqueTagError`)."""
        new = normalize_tags(tags)
        if new <= self.tags:
            return self
        return self._with_new_tags(unique_tags(
            new | self.tags, f"{type(self).__name__} of shape {self.shape}"))

    def without_tags(self, tags, verify_existence: bool = True) -> Self:
        """A copy with *tags* removed; *self* when none of them is there.
        With *verify_existence*, a tag that is not there raises
        :class:`~pytato_like.diagnostic.TagNotPresentError` (a
        :class:`ValueError`, as pytools raises)."""
        to_remove = normalize_tags(tags)
        if verify_existence and not to_remove <= self.tags:
            missing = to_remove - self.tags
            raise TagNotPresentError(
                f"cannot remove tags {set(missing)} absent from "
                f"{type(self).__name__} of shape {self.shape}")
        if not to_remove & self.tags:
            return self
        return self._with_new_tags(self.tags - to_remove)

    def with_tagged_axis(self, iaxis: int, tags) -> Array:
        """A copy whose axis *iaxis* carries *tags* in addition."""
        if not -self.ndim <= iaxis < self.ndim:
            raise AxisError(
                f"axis {iaxis} out of range for {type(self).__name__} of "
                f"shape {self.shape}")
        iaxis %= self.ndim
        axis = self.axes[iaxis]
        new = normalize_tags(tags)
        if new <= axis.tags:
            return self
        new_axis = axis._with_new_tags(unique_tags(
            new | axis.tags, f"axis {iaxis} of {type(self).__name__} of "
            f"shape {self.shape}"))
        new_axes = (*self.axes[:iaxis], new_axis, *self.axes[iaxis + 1:])
        return self.copy(axes=new_axes)

    # }}}

    # {{{ NumPy-style front end (implemented in _frontend and friends)

    @property
    def T(self) -> Array:  # noqa: N802
        return FRONT_END.transpose(self)

    @property
    def real(self) -> Array:
        return FRONT_END.real(self)

    @property
    def imag(self) -> Array:
        return FRONT_END.imag(self)

    def conj(self) -> Array:
        # ndarray.conj() keeps non-complex arrays as they are (even bool,
        # which np.conj turns into int8)
        if self.dtype.kind != "c":
            return self
        return FRONT_END.conj(self)

    conjugate = conj

    if TYPE_CHECKING:
        # installed by pytato_like._frontend (install_operators)
        def __add__(self, other: Operand) -> Array: ...
        def __radd__(self, other: Operand) -> Array: ...
        def __sub__(self, other: Operand) -> Array: ...
        def __rsub__(self, other: Operand) -> Array: ...
        def __mul__(self, other: Operand) -> Array: ...
        def __rmul__(self, other: Operand) -> Array: ...
        def __truediv__(self, other: Operand) -> Array: ...
        def __rtruediv__(self, other: Operand) -> Array: ...
        def __floordiv__(self, other: Operand) -> Array: ...
        def __rfloordiv__(self, other: Operand) -> Array: ...
        def __mod__(self, other: Operand) -> Array: ...
        def __rmod__(self, other: Operand) -> Array: ...
        def __pow__(self, other: Operand) -> Array: ...
        def __rpow__(self, other: Operand) -> Array: ...
        def __and__(self, other: Operand) -> Array: ...
        def __rand__(self, other: Operand) -> Array: ...
        def __or__(self, other: Operand) -> Array: ...
        def __ror__(self, other: Operand) -> Array: ...
        def __xor__(self, other: Operand) -> Array: ...
        def __rxor__(self, other: Operand) -> Array: ...
        def __lshift__(self, other: Operand) -> Array: ...
        def __rlshift__(self, other: Operand) -> Array: ...
        def __rshift__(self, other: Operand) -> Array: ...
        def __rrshift__(self, other: Operand) -> Array: ...
        def __lt__(self, other: Operand) -> Array: ...
        def __le__(self, other: Operand) -> Array: ...
        def __gt__(self, other: Operand) -> Array: ...
        def __ge__(self, other: Operand) -> Array: ...
        def __neg__(self) -> Array: ...
        def __pos__(self) -> Array: ...
        def __invert__(self) -> Array: ...

    def __divmod__(self, other: Operand) -> tuple[Array, Array]:
        return self // other, self % other

    def __rdivmod__(self, other: Operand) -> tuple[Array, Array]:
        return other // self, other % self

    def __abs__(self) -> Array:
        return FRONT_END.abs(self)

    # Any: every index NumPy takes, and ResultsNode (also a Mapping) narrows
    # the key to a result name
    def __getitem__(self, key: Any) -> Array:
        return FRONT_END.getitem(self, key)

    def reshape(self, *shape: ShapeArgComponent | Sequence[ShapeArgComponent],
                order: str = "C") -> Array:
        """Same data, new shape (``-1`` is inferred), as in NumPy."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer, Array)):
            return FRONT_END.reshape(self, shape[0], order=order)
        return FRONT_END.reshape(self, shape, order=order)

    def transpose(self, *axes: int | Sequence[int] | None) -> Array:
        if len(axes) == 1 and not isinstance(axes[0], (int, np.integer)):
            return FRONT_END.transpose(self, axes[0] if axes[0] else None)
        return FRONT_END.transpose(self, axes if axes else None)

    def squeeze(self, axis: AxisArg = None) -> Array:
        return FRONT_END.squeeze(self, axis)

    def ravel(self, order: str = "C") -> Array:
        return self.reshape(-1, order=order)

    flatten = ravel

    def astype(self, dtype: DTypeLike) -> Array:
        """The array converted elementwise to *dtype*."""
        return FRONT_END.astype(self, dtype)

    def sum(self, axis: AxisArg = None, keepdims: bool = False,
            **kwargs: Any) -> Array:
        return FRONT_END.sum(self, axis=axis, keepdims=keepdims, **kwargs)

    def prod(self, axis: AxisArg = None, keepdims: bool = False,
             **kwargs: Any) -> Array:
        return FRONT_END.prod(self, axis=axis, keepdims=keepdims, **kwargs)

    def max(self, axis: AxisArg = None, keepdims: bool = False,
            **kwargs: Any) -> Array:
        return FRONT_END.amax(self, axis=axis, keepdims=keepdims, **kwargs)

    def min(self, axis: AxisArg = None, keepdims: bool = False,
            **kwargs: Any) -> Array:
        return FRONT_END.amin(self, axis=axis, keepdims=keepdims, **kwargs)

    def argmax(self, axis: int | None = None, keepdims: bool = False
               ) -> Array:
        return FRONT_END.argmax(self, axis=axis, keepdims=keepdims)

    def argmin(self, axis: int | None = None, keepdims: bool = False
               ) -> Array:
        return FRONT_END.argmin(self, axis=axis, keepdims=keepdims)

    def any(self, axis: AxisArg = None, keepdims: bool = False) -> Array:
        return FRONT_END.any(self, axis=axis, keepdims=keepdims)

    def all(self, axis: AxisArg = None, keepdims: bool = False) -> Array:
        return FRONT_END.all(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: AxisArg = None, keepdims: bool = False) -> Array:
        return FRONT_END.mean(self, axis=axis, keepdims=keepdims)

    def dot(self, other: Operand) -> Array:
        return FRONT_END.dot(self, other)

    def __matmul__(self, other: Operand) -> Array:
        return FRONT_END.matmul(self, other)

    def __rmatmul__(self, other: Operand) -> Array:
        return FRONT_END.matmul(other, self)

    # }}}




# }}}


# {{{ generic field helpers

HASH_GETTERS: dict[type, Callable[[Array], tuple]] = {}

#: class -> (constructor field names, attrgetter reading them), for copy()
_CONSTRUCTOR_READERS: dict[type, tuple[tuple[str, ...],
                                        Callable[[Array], tuple]]] = {}


def _make_constructor_reader(cls: type[Array]
                             ) -> tuple[tuple[str, ...], Callable[[Array], tuple]]:
    names = cls._constructor_field_names()
    # attrgetter of several names returns a tuple, of one name the value
    read = (operator.attrgetter(*names) if len(names) > 1
            else (lambda obj, _get=operator.attrgetter(*names): (_get(obj),)))
    _CONSTRUCTOR_READERS[cls] = (names, read)
    return names, read


def make_hash_getter(cls: type[Array]) -> Callable[[Array], tuple]:
    """A function returning the hashable field values of a *cls* instance
    (wrapped data by identity), built once per class."""
    names = tuple(name for name, _ in cls._fields)
    identity = tuple(i for i, (_, kind) in enumerate(cls._fields)
                     if kind.by_identity)
    getter: Callable[[Array], tuple]
    if not identity and len(names) > 1:
        getter = operator.attrgetter(*names)
    elif not identity:
        def getter(self):
            return tuple(getattr(self, name) for name in names)
    else:
        def getter(self):
            values = [getattr(self, name) for name in names]
            for i in identity:
                values[i] = id(values[i])
            return tuple(values)
    HASH_GETTERS[cls] = getter
    return getter


_CHILD_FIELDS: dict[type, tuple[tuple[str, FieldKind], ...]] = {}
# class -> function returning the children of a node: with the size
# expressions of its shape, and without
_CHILD_GETTERS: dict[type, Callable[[Array], tuple[Array, ...]]] = {}
_CHILD_GETTERS_NO_SHAPE: dict[type, Callable[[Array], tuple[Array, ...]]] = {}


def _child_fields(cls: type[Array]) -> tuple[tuple[str, FieldKind], ...]:
    fields = tuple((name, kind) for name, kind in cls._fields
                   if kind.holds_arrays)
    _CHILD_FIELDS[cls] = fields
    return fields


def array_fields(cls: type) -> tuple[tuple[str, FieldKind], ...]:
    """``(name, kind)`` of the fields of node class *cls* that can hold
    arrays (computed once per class: walks ask per node)."""
    fields = _CHILD_FIELDS.get(cls)
    if fields is None:
        fields = _child_fields(cls)
    return fields


def _fields_getter(fields: tuple[tuple[str, FieldKind], ...]
                   ) -> Callable[[Array], tuple[Array, ...]]:
    """The arrays of *fields* of a node, in field order: single-array
    fields read with one attrgetter."""
    names = tuple(name for name, _ in fields)
    if not fields:
        return lambda expr: ()
    if all(kind is ARRAY for _, kind in fields) and len(names) > 1:
        return operator.attrgetter(*names)
    if all(kind is ARRAY for _, kind in fields) and names:
        one = operator.attrgetter(names[0])
        return lambda expr: (one(expr),)
    if len(fields) == 1:
        read, arrays = operator.attrgetter(names[0]), fields[0][1].arrays
        return lambda expr: tuple(arrays(read(expr)))
    readers = tuple((operator.attrgetter(name), kind.arrays)
                    for name, kind in fields)

    def getter(expr):
        result: list[Array] = []
        for read, arrays in readers:
            result += arrays(read(expr))
        return tuple(result)
    return getter


def _make_children_getter(cls: type, include_shape: bool
                          ) -> Callable[[Array], tuple[Array, ...]]:
    """The children function of node class *cls*, built once (walks call
    it per node)."""
    fields = array_fields(cls)
    without_shape = _fields_getter(tuple(
        (name, kind) for name, kind in fields if kind is not SHAPE))
    getter = without_shape
    shape_names = [name for name, kind in fields if kind is SHAPE]
    if include_shape and len(shape_names) > 1:
        getter = _fields_getter(fields)
    elif include_shape and shape_names:
        with_shape = _fields_getter(fields)
        read_shape = operator.attrgetter(shape_names[0])

        # (a shape of ints, as almost every node has, adds no child: the
        # other fields' getter then, 2.7x faster for an index lambda)
        def getter(expr, _int=int):
            for d in read_shape(expr):
                if type(d) is not _int:
                    return with_shape(expr)
            return without_shape(expr)
    (_CHILD_GETTERS if include_shape
     else _CHILD_GETTERS_NO_SHAPE)[cls] = getter
    return getter


def children_of(expr: Array, include_shape: bool = True) -> tuple[Array, ...]:
    """Every array *expr* refers to: data-flow operands and index arrays,
    and (unless *include_shape* is false) the size expressions in its shape,
    in field order, duplicates kept."""
    cls = type(expr)
    if cls is NamedArray:
        return (cast(NamedArray, expr).expr,)
    getter = (_CHILD_GETTERS if include_shape
              else _CHILD_GETTERS_NO_SHAPE).get(cls)
    if getter is None:
        getter = _make_children_getter(cls, include_shape)
    return getter(expr)


def check_tags(tags) -> frozenset[Tag]:
    return check_tag_uniqueness(normalize_tags(tags))


def unique_tags(tags: frozenset[Tag], what: str) -> frozenset[Tag]:
    """*tags*, checked by :func:`pytools.tag.check_tag_uniqueness`; a
    conflict raises :class:`~pytato_like.diagnostic.NonUniqueTagError`
    naming *what* carries them."""
    try:
        return check_tag_uniqueness(tags)
    except NonUniqueTagError as err:
        # (the package's error, which is also pytools')
        raise DiagnosticNonUniqueTagError(
            f"tags {sorted(map(repr, tags))} of {what}: {err}") from None

# }}}


# {{{ inputs

class InputArgumentBase(Array):
    """Base class of arrays whose values come from outside the DAG."""

    __slots__ = ()


class Placeholder(InputArgumentBase):
    """A named input whose value is passed when the program runs.

    .. attribute:: name
    """

    __slots__ = ("name",)
    _mapper_method = "map_placeholder"
    _fields = (("name", VALUE), ("shape", SHAPE), ("dtype", VALUE))

    def __init__(self, name: str, shape, dtype, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self._finish_init(axes, tags, non_equality_tags)


class DataWrapper(InputArgumentBase):
    """An input whose value (a NumPy or pyopencl array) is known when the
    DAG is built. Two data wrappers are equal only if they wrap the very
    same data object.

    .. attribute:: data
    .. attribute:: name

        Optional name (``None`` for anonymous data).
    """

    __slots__ = ("data", "name")
    _mapper_method = "map_data_wrapper"
    _fields = (("data", IDENTITY), ("shape", SHAPE), ("name", VALUE))

    def __init__(self, data, shape, name: str | None = None, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.data = data
        self.shape = shape
        self.name = name
        self.dtype = np.dtype(data.dtype)
        self._finish_init(axes, tags, non_equality_tags)


class SizeParam(InputArgumentBase):
    """A named integer scalar usable in shapes.

    .. attribute:: name
    """

    __slots__ = ("name",)
    _mapper_method = "map_size_param"
    _fields = (("name", VALUE),)

    def __init__(self, name: str, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.name = name
        self.shape = ()
        self.dtype = np.dtype(np.int64)
        self._finish_init(axes, tags, non_equality_tags)


# }}}


# {{{ index lambda

class IndexLambda(Array):
    """An array defined by a scalar expression of its indices.

    .. attribute:: expr

        A :mod:`pytato_like.scalar_expr` expression giving the value at index
        ``(_0, _1, ...)``.

    .. attribute:: bindings

        Mapping from the array names used in :attr:`expr` to arrays.

    .. attribute:: var_to_reduction_descr

        Mapping from each reduction variable in :attr:`expr` to its
        :class:`ReductionDescriptor`.
    """

    __slots__ = ("bindings", "expr", "var_to_reduction_descr")
    _mapper_method = "map_index_lambda"
    _fields = (("expr", VALUE), ("shape", SHAPE), ("dtype", VALUE),
               ("bindings", BINDINGS), ("var_to_reduction_descr", VALUE))

    def __init__(self, expr, shape, dtype, bindings,
                 var_to_reduction_descr=None, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.expr = expr
        self.shape = shape
        self.dtype = dtype
        if type(bindings) is constantdict:
            # the hash constantdict caches, read without a Python call
            bindings_hash = getattr(bindings, "_hash", None)
            if bindings_hash is None:
                # what constantdict.__hash__ computes and caches
                bindings_hash = bindings._hash = hash(
                    frozenset(bindings.items()))
        else:
            bindings = constantdict(bindings)
            # what constantdict.__hash__ would compute and cache on first use
            bindings_hash = bindings._hash = hash(frozenset(bindings.items()))
        self.bindings = bindings
        if var_to_reduction_descr is None or (
                not var_to_reduction_descr
                and type(var_to_reduction_descr) is constantdict):
            var_to_reduction_descr = _EMPTY_MAP
            reductions_hash = _EMPTY_MAP_HASH
        else:
            if type(var_to_reduction_descr) is not constantdict:
                var_to_reduction_descr = constantdict(var_to_reduction_descr)
            reductions_hash = hash(var_to_reduction_descr)
        self.var_to_reduction_descr = var_to_reduction_descr
        # IndexLambda is the most common node: hash it without the generic
        # field walk of _finish_init (same fields, same result kind).
        if axes is None:
            axes = default_axes(len(shape))
        elif len(axes) != len(shape):
            raise AxisError(f"IndexLambda of shape {shape} got {len(axes)} "
                            "axes metadata entries")
        self.axes = axes
        self.tags = tags
        self.non_equality_tags = (
            created_at_tags(non_equality_tags) if ENABLE_TRACEBACK_TAG
            else non_equality_tags)
        self._hash = hash((IndexLambda, expr, shape, dtype, bindings_hash,
                           reductions_hash, axes, tags))


    def with_tagged_reduction(self, reduction_variable: str, tags) -> IndexLambda:
        """A copy whose reduction over *reduction_variable* (a name in
        :attr:`var_to_reduction_descr`, e.g. from
        :attr:`pytato_like.raising.ReduceOp.axes`) carries *tags* in
        addition."""
        if not isinstance(reduction_variable, str):
            raise NotAReductionAxis(
                f"reduction variable must be a str, got {reduction_variable!r}")
        if reduction_variable not in self.var_to_reduction_descr:
            raise NotAReductionAxis(
                f"{reduction_variable!r} is not a reduction variable of the "
                f"IndexLambda of shape {self.shape} (its reduction variables: "
                f"{sorted(self.var_to_reduction_descr)})")
        descrs = dict(self.var_to_reduction_descr)
        descr = descrs[reduction_variable]
        new = normalize_tags(tags)
        if new <= descr.tags:
            return self
        descrs[reduction_variable] = descr._with_new_tags(unique_tags(
            new | descr.tags, f"reduction {reduction_variable!r} of the "
            f"IndexLambda of shape {self.shape}"))
        return self.copy(var_to_reduction_descr=constantdict(descrs))


_EMPTY_MAP: constantdict = constantdict()
_EMPTY_MAP_HASH = hash(_EMPTY_MAP)  # cached in it too

# }}}


# {{{ einsum

@dataclasses.dataclass(frozen=True)
class EinsumAxisDescriptor:
    """How one axis of an einsum operand is accessed."""


@dataclasses.dataclass(frozen=True)
class EinsumElementwiseAxis(EinsumAxisDescriptor):
    """The operand axis runs along output axis :attr:`dim`."""

    dim: int


@dataclasses.dataclass(frozen=True)
class EinsumReductionAxis(EinsumAxisDescriptor):
    """The operand axis runs along reduction axis :attr:`dim`."""

    dim: int


class Einsum(Array):
    """A sum of products of its operands, as in :func:`numpy.einsum`.

    .. attribute:: access_descriptors

        For each operand, one :class:`EinsumAxisDescriptor` per operand axis.

    .. attribute:: args
    .. attribute:: redn_axis_to_redn_descr

        Mapping from :class:`EinsumReductionAxis` to
        :class:`ReductionDescriptor`.
    """

    __slots__ = ("access_descriptors", "args", "redn_axis_to_redn_descr")
    _mapper_method = "map_einsum"
    _fields = (("access_descriptors", VALUE), ("args", ARRAY_TUPLE),
               ("redn_axis_to_redn_descr", VALUE))

    def __init__(self, access_descriptors, args, redn_axis_to_redn_descr=None,
                 axes=None, tags: frozenset[Tag] = NO_TAGS,
                 index_to_access_descr=None,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.access_descriptors = tuple(tuple(d) for d in access_descriptors)
        self.args = tuple(args)
        if redn_axis_to_redn_descr is None:
            redn_axis_to_redn_descr = {
                descr: _DEFAULT_REDUCTION_DESCR
                for acc in self.access_descriptors for descr in acc
                if isinstance(descr, EinsumReductionAxis)}
        self.redn_axis_to_redn_descr = constantdict(redn_axis_to_redn_descr)
        self.shape, self.dtype = _einsum_shape_and_dtype(
            self.access_descriptors, self.args)
        if len(self.shape) > 1:
            check_element_count(self.shape)
        self._finish_init(axes, tags, non_equality_tags)

    def _get_reduction_extents(self
                               ) -> dict[EinsumReductionAxis, ShapeComponent]:
        extents: dict[EinsumReductionAxis, ShapeComponent] = {}
        for acc, arg in zip(self.access_descriptors, self.args, strict=True):
            for descr, dim in zip(acc, arg.shape, strict=True):
                if isinstance(descr, EinsumReductionAxis) and dim != 1:
                    extents[descr] = dim
                elif isinstance(descr, EinsumReductionAxis):
                    extents.setdefault(descr, dim)
        return extents


def _einsum_shape_and_dtype(access_descriptors, args):
    out_extents: dict[int, ShapeComponent] = {}
    for acc, arg in zip(access_descriptors, args, strict=True):
        if len(acc) != arg.ndim:
            raise EinsumSpecError(
                f"einsum operand of shape {arg.shape} got {len(acc)} axis "
                "descriptors")
        for descr, dim in zip(acc, arg.shape, strict=True):
            if isinstance(descr, EinsumElementwiseAxis):
                if out_extents.get(descr.dim, 1) == 1:
                    out_extents[descr.dim] = dim
    ndim = len(out_extents)
    if set(out_extents) != set(range(ndim)):
        raise EinsumSpecError(
            f"einsum output axes {sorted(out_extents)} are not 0..{ndim - 1}")
    shape = tuple(out_extents[i] for i in range(ndim))
    dtype = np.result_type(*(arg.dtype for arg in args))
    return shape, dtype

# }}}


# {{{ index remapping

class IndexRemappingBase(Array):
    """Base class of arrays whose entries are entries of :attr:`array` at
    other indices.

    .. attribute:: array
    """

    __slots__ = ("array",)


class Reshape(IndexRemappingBase):
    """:attr:`array` reshaped to :attr:`newshape` in :attr:`order`
    (``"C"`` or ``"F"``)."""

    __slots__ = ("order",)
    _mapper_method = "map_reshape"
    _fields = (("array", ARRAY), ("newshape", SHAPE), ("order", VALUE))

    def __init__(self, array: Array, newshape, order: str = "C", axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.array = array
        self.shape = tuple(newshape)
        self.order = order
        self.dtype = array.dtype
        self._finish_init(axes, tags, non_equality_tags)

    @property
    def newshape(self) -> tuple[ShapeComponent, ...]:
        return self.shape


class AxisPermutation(IndexRemappingBase):
    """Axis ``i`` of the result is axis ``axis_permutation[i]`` of
    :attr:`array`."""

    __slots__ = ("axis_permutation",)
    _mapper_method = "map_axis_permutation"
    _fields = (("array", ARRAY), ("axis_permutation", VALUE))

    def __init__(self, array: Array, axis_permutation, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.array = array
        self.axis_permutation = tuple(axis_permutation)
        self.shape = tuple(array.shape[i] for i in self.axis_permutation)
        self.dtype = array.dtype
        self._finish_init(axes, tags, non_equality_tags)


class Roll(IndexRemappingBase):
    """:attr:`array` rolled by :attr:`shift` along :attr:`axis`, as
    :func:`numpy.roll`."""

    __slots__ = ("axis", "shift")
    _mapper_method = "map_roll"
    _fields = (("array", ARRAY), ("shift", VALUE), ("axis", VALUE))

    def __init__(self, array: Array, shift: int, axis: int, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.array = array
        self.shift = shift
        self.axis = axis
        self.shape = array.shape
        self.dtype = array.dtype
        self._finish_init(axes, tags, non_equality_tags)


@dataclasses.dataclass(frozen=True)
class NormalizedSlice:
    """A slice with concrete, normalized bounds: the indices
    ``start, start + step, ...`` strictly before ``stop``, as
    ``range(start, stop, step)``. ``stop`` is None only for the full slice
    of a symbolic axis."""

    start: int
    stop: int | None
    step: int

    def to_slice(self) -> slice:
        if self.stop is not None and self.length == 0:
            return slice(0, 0, 1)  # e.g. (-1, -1, -2) would read the last entry
        stop = self.stop
        if self.step < 0 and stop is not None and stop < 0:
            stop = None  # run through index 0
        return slice(self.start, stop, self.step)

    @property
    def length(self) -> int:
        # (asked of concrete slices only: stop is an int there)
        return len(range(self.start, cast(int, self.stop), self.step))


class IndexBase(IndexRemappingBase):
    """Base class of indexing expressions ``array[indices]``.

    .. attribute:: indices

        One entry per axis of :attr:`array`: an ``int``, a
        :class:`NormalizedSlice`, or an integer :class:`Array`.
    """

    __slots__ = ("indices",)
    _fields = (("array", ARRAY), ("indices", INDICES))

    def __init__(self, array: Array, indices, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.array = array
        self.indices = tuple(indices)
        self.shape = self._compute_shape()
        self.dtype = array.dtype
        self._finish_init(axes, tags, non_equality_tags)

    def _compute_shape(self) -> tuple[ShapeComponent, ...]:
        raise NotImplementedError


def _slice_extent(idx, dim):
    if idx.stop is None:
        return dim  # the full slice of a symbolic dimension
    return idx.length


class BasicIndex(IndexBase):
    """Indexing with ints and slices only."""

    __slots__ = ()
    _mapper_method = "map_basic_index"

    def _compute_shape(self):
        return tuple(_slice_extent(idx, dim)
                     for idx, dim in zip(self.indices, self.array.shape,
                                         strict=True)
                     if isinstance(idx, NormalizedSlice))


def _advanced_index_shape(indices) -> tuple[ShapeComponent, ...]:
    return FRONT_END.get_shape_after_broadcasting(
        [i for i in indices if isinstance(i, Array)])


class AdvancedIndexInContiguousAxes(IndexBase):
    """Indexing with integer arrays (and ints) on adjacent axes: the
    broadcast index dimensions replace those axes in place."""

    __slots__ = ()
    _mapper_method = "map_contiguous_advanced_index"

    def _compute_shape(self):
        adv_shape = _advanced_index_shape(self.indices)
        adv_positions = [i for i, idx in enumerate(self.indices)
                         if not isinstance(idx, NormalizedSlice)]
        first = adv_positions[0]
        shape: list[ShapeComponent] = []
        for i, (idx, dim) in enumerate(zip(self.indices, self.array.shape,
                                           strict=True)):
            if i == first:
                shape.extend(adv_shape)
            if isinstance(idx, NormalizedSlice):
                shape.append(_slice_extent(idx, dim))
        return tuple(shape)


class AdvancedIndexInNoncontiguousAxes(IndexBase):
    """Indexing with integer arrays (and ints) separated by slices: the
    broadcast index dimensions come first, as in NumPy."""

    __slots__ = ()
    _mapper_method = "map_non_contiguous_advanced_index"

    def _compute_shape(self):
        adv_shape = _advanced_index_shape(self.indices)
        return (*adv_shape,
                *(_slice_extent(idx, dim)
                  for idx, dim in zip(self.indices, self.array.shape,
                                      strict=True)
                  if isinstance(idx, NormalizedSlice)))

# }}}


# {{{ concatenate / stack

class Concatenate(Array):
    """:attr:`arrays` joined along existing axis :attr:`axis`."""

    __slots__ = ("arrays", "axis")
    _mapper_method = "map_concatenate"
    _fields = (("arrays", ARRAY_TUPLE), ("axis", VALUE))

    def __init__(self, arrays, axis: int, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.arrays = tuple(arrays)
        self.axis = axis
        first = self.arrays[0].shape
        total = _shape_sum(a.shape[axis] for a in self.arrays)
        self.shape = (*first[:axis], total, *first[axis + 1:])
        self.dtype = np.result_type(*(a.dtype for a in self.arrays))
        self._finish_init(axes, tags, non_equality_tags)


def _shape_sum(dims) -> ShapeComponent:
    total: ShapeComponent = 0
    for d in dims:
        total = total + d
    return total


class Stack(Array):
    """:attr:`arrays` (all of one shape) joined along a new axis
    :attr:`axis`."""

    __slots__ = ("arrays", "axis")
    _mapper_method = "map_stack"
    _fields = (("arrays", ARRAY_TUPLE), ("axis", VALUE))

    def __init__(self, arrays, axis: int, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self.arrays = tuple(arrays)
        self.axis = axis
        first = self.arrays[0].shape
        self.shape = (*first[:axis], len(self.arrays), *first[axis:])
        self.dtype = np.result_type(*(a.dtype for a in self.arrays))
        self._finish_init(axes, tags, non_equality_tags)

# }}}


# {{{ named results

class AbstractResultWithNamedArrays(Mapping, _TaggableMixin):
    """A mapping from names to :class:`NamedArray` results of one
    computation; :class:`pytools.tag.Taggable` (as pytato's)."""

    _mapper_method: ClassVar[str]
    # NumPy defers binary operators to us (and refuses ufuncs). ResultsNode,
    # also an Array, takes Array's method, which _numpy_interop installs at
    # run time (mypy sees only this declaration).
    __array_ufunc__: None = None


class NamedArray(Array):
    """The entry *name* of a :class:`AbstractResultWithNamedArrays`.

    .. attribute:: _container
    .. attribute:: name
    """

    __slots__ = ("_container", "name")
    _mapper_method = "map_named_array"
    # (kinds of several value types: subclasses put others here)
    _fields: ClassVar[tuple[tuple[str, FieldKind], ...]] = (
        ("_container", VALUE), ("name", VALUE))

    def __init__(self, _container, name: str, axes=None,
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self._container = _container
        self.name = name
        expr = _container._data[name]
        self.shape = expr.shape
        self.dtype = expr.dtype
        self._finish_init(axes, tags, non_equality_tags)

    @property
    def expr(self) -> Array:
        return self._container._data[self.name]


class DictOfNamedArrays(AbstractResultWithNamedArrays):
    """Named results of a program: ``d[name]`` is a :class:`NamedArray`
    referring to the array registered under *name*.

    .. attribute:: _data

        The mapping from names to the underlying arrays.
    """

    _mapper_method = "map_dict_of_named_arrays"

    def __init__(self, data: Mapping[str, Array],
                 tags: frozenset[Tag] = NO_TAGS,
                 non_equality_tags: frozenset[Tag] = NO_TAGS) -> None:
        self._data = constantdict(data)
        self.tags = tags
        self._hash = hash((DictOfNamedArrays, self._data, tags))
        self._named = {name: NamedArray(self, name) for name in self._data}

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, DictOfNamedArrays) or self._hash != other._hash:
            return False
        if set(self._data) != set(other._data) or self.tags != other.tags:
            return False
        names = list(self._data)
        return FRONT_END.structurally_equal_many([self._data[n] for n in names],
                                       [other._data[n] for n in names])

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __getitem__(self, name: str) -> NamedArray:
        return self._named[name]

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def keys(self):
        return self._data.keys()

    def __reduce__(self):
        names = list(self._data)
        records, positions = FRONT_END.flatten_dags([self._data[n] for n in names])
        return (_unpickle_dict_of_named_arrays,
                (records, dict(zip(names, positions, strict=True)), self.tags))

    def __repr__(self) -> str:
        return FRONT_END.dag_repr(self)

    def _repr_html_(self) -> str:
        return FRONT_END.dag_html(self)

    def _with_new_tags(self, tags: frozenset[Tag]) -> DictOfNamedArrays:
        # (tagged and without_tags: pytools' Taggable)
        return DictOfNamedArrays(self._data, tags)

# }}}


def _unpickle_dict_of_named_arrays(records, name_to_position, tags):
    names = list(name_to_position)
    arrays = FRONT_END.unflatten_dags(records, [name_to_position[n] for n in names])
    return DictOfNamedArrays(dict(zip(names, arrays, strict=True)), tags=tags)


# {{{ constructors

def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise InvalidNameError(f"{what} name {name!r} is not a valid identifier")
    return name


#: The dtypes arrays may have: those both targets compute with exactly
#: NumPy's results (OpenCL has no portable half precision, and object,
#: string, datetime and extended-precision arrays have no device form).
SUPPORTED_DTYPES = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
    np.uint32, np.uint64, np.float32, np.float64, np.complex64,
    np.complex128))


def supported_dtype(dtype: DTypeLike, what: str) -> np.dtype:
    """*dtype* as a :class:`numpy.dtype`; raises
    :class:`~pytato_like.diagnostic.DTypeError` naming *what* when arrays
    of it are not supported (float16, object, ...)."""
    try:
        dtype = np.dtype(dtype)
    except TypeError as err:
        raise DTypeError(f"{what}: {dtype!r} is not a dtype") from err
    if dtype not in SUPPORTED_DTYPES:
        raise DTypeError(
            f"{what}: dtype {dtype} is not supported (supported: bool, "
            "signed and unsigned integers of 8 to 64 bits, float32, float64, "
            "complex64, complex128)")
    return dtype


def make_placeholder(name: str, shape: ShapeArg, dtype: DTypeLike = np.float64,
                     axes: Sequence[Axis] | None = None,
                     tags: TagsArg = frozenset()) -> Placeholder:
    """A named input of the given *shape* and *dtype*."""
    _check_name(name, "placeholder")
    return Placeholder(name, normalize_shape(shape),
                       supported_dtype(dtype, f"placeholder '{name}'"),
                       axes=axes, tags=check_tags(tags))


def make_size_param(name: str, tags: TagsArg = frozenset()) -> SizeParam:
    """A named integer usable in shapes; its value is passed at run time."""
    _check_name(name, "size parameter")
    return SizeParam(name, tags=check_tags(tags))


def make_data_wrapper(data: DataInterface | ArrayLike, name: str | None = None,
                      shape: ShapeArg | None = None,
                      axes: Sequence[Axis] | None = None,
                      tags: TagsArg = frozenset()) -> DataWrapper:
    """An input whose value *data* (NumPy or pyopencl array) is known now."""
    if name is not None:
        _check_name(name, "data wrapper")
    if not hasattr(data, "shape") or not hasattr(data, "dtype"):
        data = np.asarray(data)
    data = cast("DataInterface", data)
    what = f"data wrapper '{name}'" if name is not None else "data wrapper"
    supported_dtype(data.dtype, f"{what} of shape {tuple(data.shape)}")
    if shape is None:
        shape = data.shape
    shape = normalize_shape(shape)
    if all(isinstance(s, int) for s in shape) and tuple(shape) != tuple(data.shape):
        raise ShapeMismatchError(
            f"data wrapper {name or ''} declared shape {shape} but its data "
            f"has shape {data.shape}")
    return DataWrapper(data, shape, name=name, axes=axes, tags=check_tags(tags))


def make_dict_of_named_arrays(data: Mapping[str, Array],
                              tags: TagsArg = frozenset()
                              ) -> DictOfNamedArrays:
    """Bundle named results into one :class:`DictOfNamedArrays`."""
    for name, ary in data.items():
        if not isinstance(ary, Array):
            raise NotAnArrayError(
                f"result {name!r} is a {type(ary).__name__}, not an Array")
    return DictOfNamedArrays(data, tags=check_tags(tags))


def normalize_outputs(result: object, what: str = "generate code",
                      error: type[Exception] = NotAnArrayError
                      ) -> tuple[dict[str, Array], bool]:
    """``(name -> array, is_single_array)`` for a program result: an array
    alone (named ``_pt_out``), a :class:`DictOfNamedArrays` or a mapping of
    names to arrays. The one place that knows these forms: code generators,
    partitioners, analyses, printers and drawings all ask it. Anything else
    raises *error* naming its type and *what* was attempted."""
    if isinstance(result, DictOfNamedArrays):
        return dict(result._data), False
    if isinstance(result, Array):
        return {"_pt_out": result}, True
    if isinstance(result, Mapping) and not isinstance(
            result, AbstractResultWithNamedArrays):
        return dict(make_dict_of_named_arrays(result)._data), False
    raise error(f"{what}: expected an Array, a DictOfNamedArrays or a dict "
                f"of arrays, got a {type(result).__name__}")


def output_arrays(result: object, what: str = "generate code",
                  error: type[Exception] = NotAnArrayError) -> list[Array]:
    """The arrays of a program result (as :func:`normalize_outputs`), in
    output order, an array named twice listed twice."""
    return list(normalize_outputs(result, what, error)[0].values())

# }}}

# {{{ mixins of node classes declared as dataclasses (pytato's names)

@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class _SuppliedAxesAndTagsMixin(Taggable):
    """Gives a dataclass node the keyword-only fields ``axes`` (``None``:
    one untagged :class:`Axis` per dimension), ``tags`` and
    ``non_equality_tags`` (compared and hashed by nothing), as pytato's
    mixin of this name (see :mod:`pytato_like._dataclass_nodes`)."""

    axes: Sequence[Axis] | None = dataclasses.field(kw_only=True, default=None)
    tags: frozenset[Tag] = dataclasses.field(kw_only=True, default=NO_TAGS)
    non_equality_tags: frozenset[Tag] = dataclasses.field(
        kw_only=True, default=NO_TAGS, compare=False, hash=False)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class _SuppliedShapeAndDtypeMixin:
    """Gives a dataclass node the fields ``shape`` and ``dtype`` (for nodes
    that cannot derive them from their operands), as pytato's mixin of this
    name."""

    shape: ShapeType
    dtype: np.dtype


# The defaults above live in the generated constructors; as class
# attributes they would hide Array's slots for these names.
for _name in ("axes", "tags", "non_equality_tags"):
    delattr(_SuppliedAxesAndTagsMixin, _name)

# }}}


# vim: foldmethod=marker
