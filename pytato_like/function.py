"""Outlined function calls: a traced Python function becomes one
:class:`FunctionDefinition`, and each use of it one :class:`Call` node.

Outlining keeps a program that applies the same function many times (a flux
function per face, an operator per element group) small: the function's
body is a DAG of its own, over placeholders named by its
:attr:`~FunctionDefinition.parameters`, stored once however often it is
called. :func:`trace_call` builds both; the results of a call are
:class:`NamedCallResult` arrays, one per returned array.

How the pieces fit the rest of the package:

* :class:`Call` is a node of the DAG (its arrays are the argument
  :attr:`~Call.bindings`; the definition is a plain value field), so
  hashing, equality, pickling, copying, dead-code elimination and every
  generic walk handle it through the field table like any other node. A
  :class:`Call` is also a mapping from result names to
  :class:`NamedCallResult`, as pytato's is.
* :class:`NamedCallResult` is the array a consumer reads; its one child
  is the call.
* Mappers dispatch to ``map_call``, ``map_named_call_result`` and, through
  ``rec_function_definition``, ``map_function_definition``.
* The NumPy target evaluates the body once per call site; the loopy target
  compiles each definition once (see :mod:`pytato_like.target.loopy.outlined`);
  :func:`pytato_like.transform.calls.inline_calls` substitutes bodies.

.. autofunction:: trace_call
.. autoclass:: FunctionDefinition
    :members: get_placeholder, tagged, without_tags
.. autoclass:: Call
.. autoclass:: NamedCallResult
.. autoclass:: ReturnType
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any

from constantdict import constantdict
from pytools.tag import Tag, normalize_tags

from pytato_like._results_node import NodeResult, ResultsNode
from pytato_like._traversal import (
    flatten_dags,
    structurally_equal_many,
    topological_order,
    unflatten_dags,
)
from pytato_like.array import (
    BINDINGS,
    VALUE,
    Array,
    Placeholder,
)
from pytato_like.diagnostic import (
    InputDTypeMismatchError,
    InputShapeMismatchError,
    InvalidNameError,
    MissingInputError,
    NotAnArrayError,
    UnexpectedInputError,
)
from pytato_like.tags import FunctionIdentifier
from pytato_like.utils import are_shapes_equal

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pytools.tag import ToTagSetConvertible

    from pytato_like.array import Axis

    #: what calling a function definition returns, in the structure the
    #: traced function returned
    CallResults = Array | tuple[Array, ...] | Mapping[str, Array]

__all__ = ["Call", "FunctionDefinition", "NamedCallResult", "ReturnType",
           "trace_call"]

_NO_TAGS: frozenset[Tag] = frozenset()


@enum.unique
class ReturnType(enum.Enum):
    """What the traced function returned: one array (stored under the key
    ``"_"``), a tuple (keys ``"_0"``, ``"_1"``, ...) or a dict (its own
    keys)."""

    ARRAY = 0
    DICT_OF_ARRAYS = 1
    TUPLE_OF_ARRAYS = 2


def _shapes_equal(a: tuple, b: tuple) -> bool:
    return are_shapes_equal(a, b)


class FunctionDefinition:
    """The body of an outlined function.

    .. attribute:: parameters

        A :class:`frozenset` of the names of the body's placeholders (a
        superset of those the returns read: unused parameters are allowed).

    .. attribute:: return_type

        A :class:`ReturnType`.

    .. attribute:: returns

        A mapping from return name to the array computed (keys as described
        in :class:`ReturnType`).

    .. attribute:: tags

    Immutable and hashed once; ``==`` compares the bodies structurally.
    Calling a definition with the parameters as keyword arguments makes a
    :class:`Call` and returns its results in the shape the traced function
    returned them (an array, a tuple or a dict).
    """

    __slots__ = ("__weakref__", "_hash", "_placeholders", "parameters",
                 "return_type", "returns", "tags")

    #: the placeholders of the body by name (set by ``_check_placeholders``)
    _placeholders: Mapping[str, Placeholder]

    def __init__(self, parameters: frozenset[str], return_type: ReturnType,
                 returns: Mapping[str, Array], *,
                 tags: frozenset[Tag] = _NO_TAGS) -> None:
        if not isinstance(return_type, ReturnType):
            raise NotAnArrayError(f"return_type must be a ReturnType, got "
                                  f"{return_type!r}")
        for name, ary in returns.items():
            if not isinstance(ary, Array):
                raise NotAnArrayError(
                    f"the return {name!r} of a function definition is a "
                    f"{type(ary).__name__}, not an array")
        self.parameters = frozenset(parameters)
        self.return_type = return_type
        self.returns = (returns if type(returns) is constantdict
                        else constantdict(returns))
        self.tags = frozenset(tags)
        self._hash = hash((FunctionDefinition, self.parameters, return_type,
                           self.returns, self.tags))
        self._check_placeholders()

    def _check_placeholders(self) -> None:
        found: dict[str, Placeholder] = {}
        for node in topological_order(list(self.returns.values())):
            if isinstance(node, Placeholder):
                other = found.setdefault(node.name, node)
                if other is not node and other != node:
                    raise InvalidNameError(
                        f"two different placeholders named {node.name!r} in "
                        "one function definition")
        extra = sorted(set(found) - self.parameters)
        if extra:
            raise InvalidNameError(
                f"the function definition reads placeholder {extra[0]!r}, "
                f"which is not among its parameters {sorted(self.parameters)}"
                " (a function body may only read its parameters)")
        self._placeholders = constantdict(found)

    # {{{ identity

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, FunctionDefinition) \
                or self._hash != other._hash:
            return False
        if (self.parameters != other.parameters
                or self.return_type != other.return_type
                or self.tags != other.tags
                or self.returns.keys() != other.returns.keys()):
            return False
        names = list(self.returns)
        return structurally_equal_many([self.returns[n] for n in names],
                                       [other.returns[n] for n in names])

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __reduce__(self):
        # all returns in one flat record list: shared subexpressions stay
        # shared, and deep bodies pickle without recursion
        names = list(self.returns)
        records, positions = flatten_dags([self.returns[n] for n in names])
        return (_unpickle_function_definition,
                (self.parameters, self.return_type, records,
                 dict(zip(names, positions, strict=True)), self.tags))

    def __repr__(self) -> str:
        ident = self.identifier
        return (f"FunctionDefinition({ident or 'anonymous'!s}, parameters="
                f"{sorted(self.parameters)}, returns={sorted(self.returns)})")

    # }}}

    @property
    def identifier(self) -> Hashable | None:
        """The :class:`~pytato_like.tags.FunctionIdentifier` of the
        definition, or ``None``."""
        for tag in self.tags:
            if isinstance(tag, FunctionIdentifier):
                return tag.identifier
        return None

    def get_placeholder(self, name: str) -> Placeholder:
        """The body's placeholder for parameter *name* (only for parameters
        the body reads)."""
        assert self._placeholders is not None
        try:
            return self._placeholders[name]
        except KeyError:
            raise MissingInputError(
                f"the function definition does not read a parameter named "
                f"{name!r}; it reads {sorted(self._placeholders)}") from None

    def copy(self, **kwargs: Any) -> FunctionDefinition:
        values: dict[str, Any] = {"parameters": self.parameters,
                  "return_type": self.return_type, "returns": self.returns,
                  "tags": self.tags}
        values.update(kwargs)
        tags = values.pop("tags")
        return FunctionDefinition(**values, tags=tags)

    def tagged(self, tags: ToTagSetConvertible) -> FunctionDefinition:
        return self.copy(tags=self.tags | normalize_tags(tags))

    def without_tags(self, tags: ToTagSetConvertible, verify_existence: bool = True
                     ) -> FunctionDefinition:
        to_remove = normalize_tags(tags)
        if verify_existence and not to_remove <= self.tags:
            raise ValueError(f"cannot remove tags {set(to_remove - self.tags)}"
                             " absent from the function definition")
        return self.copy(tags=self.tags - to_remove)

    def _with_new_tags(self, tags: frozenset[Tag]) -> FunctionDefinition:
        return self.copy(tags=tags)

    def __call__(self, **kwargs: Array) -> CallResults:
        """Call the function with the parameters bound to *kwargs*."""
        call = Call(self, constantdict(kwargs))
        if self.return_type is ReturnType.ARRAY:
            return call["_"]
        if self.return_type is ReturnType.TUPLE_OF_ARRAYS:
            return tuple(call[f"_{i}"] for i in range(len(self.returns)))
        return constantdict({name: call[name] for name in self.returns})


def _unpickle_function_definition(parameters, return_type, records,
                                  name_to_position, tags):
    names = list(name_to_position)
    arrays = unflatten_dags(records, [name_to_position[n] for n in names])
    return FunctionDefinition(parameters, return_type,
                              dict(zip(names, arrays, strict=True)), tags=tags)


class Call(ResultsNode):
    """One invocation of a :class:`FunctionDefinition`.

    .. attribute:: function

        The :class:`FunctionDefinition` called.

    .. attribute:: bindings

        A mapping from each parameter name to the array passed for it.

    A :class:`Call` is a mapping from the names of the definition's returns
    to :class:`NamedCallResult` arrays (``call["_"]``, ``call["_0"]``,
    ...). It is a node of the DAG with no value of its own (its
    :attr:`shape` is ``()`` and its :attr:`dtype` the empty ``void``
    dtype); the arrays are its results.
    """

    _mapper_method = "map_call"
    _fields = (("function", VALUE), ("bindings", BINDINGS))

    def __init__(self, function: FunctionDefinition,
                 bindings: Mapping[str, Array], axes: Sequence[Axis] | None = None,
                 tags: frozenset[Tag] = _NO_TAGS,
                 non_equality_tags: frozenset[Tag] = _NO_TAGS) -> None:
        if not isinstance(function, FunctionDefinition):
            raise NotAnArrayError(f"a Call needs a FunctionDefinition, got a "
                                  f"{type(function).__name__}")
        given = frozenset(bindings)
        if given != function.parameters:
            missing = sorted(function.parameters - given)
            if missing:
                raise MissingInputError(
                    f"call of {function.identifier or 'a function'}: no "
                    f"argument for parameter(s) {missing}")
            raise UnexpectedInputError(
                f"call of {function.identifier or 'a function'}: unexpected "
                f"argument(s) {sorted(given - function.parameters)}; the "
                f"parameters are {sorted(function.parameters)}")
        assert function._placeholders is not None
        for name, arg in bindings.items():
            if not isinstance(arg, Array):
                raise NotAnArrayError(
                    f"argument {name!r} of a call is a {type(arg).__name__}, "
                    "not an array")
            expected = function._placeholders.get(name)
            if expected is None:
                continue
            if expected.dtype != arg.dtype:
                raise InputDTypeMismatchError(
                    f"argument {name!r} of a call of "
                    f"{function.identifier or 'a function'} has dtype "
                    f"{arg.dtype}; the function was traced with {expected.dtype}")
            if not _shapes_equal(expected.shape, arg.shape):
                raise InputShapeMismatchError(
                    f"argument {name!r} of a call of "
                    f"{function.identifier or 'a function'} has shape "
                    f"{arg.shape}; the function was traced with "
                    f"{expected.shape}")
        self.function = function
        self.bindings = (bindings if type(bindings) is constantdict
                         else constantdict(bindings))
        self._finish_results_init(axes, tags, non_equality_tags)

    def _result_names(self) -> list[str]:
        return list(self.function.returns)

    def _make_result(self, name: str) -> NamedCallResult:
        ret = self.function.returns[name]
        return NamedCallResult(self, name, axes=ret.axes, tags=ret.tags)

    def copy(self, **kwargs: Any) -> Call:
        new = super().copy(**kwargs)
        assert isinstance(new, Call)
        return new


class NamedCallResult(NodeResult):
    """The array a :class:`Call` returns under :attr:`name`.

    .. attribute:: call

        The :class:`Call` (also available as ``_container``).

    .. attribute:: name
    """

    __slots__ = ()
    _mapper_method = "map_named_call_result"

    def __init__(self, _container: Call, name: str,
                 axes: Sequence[Axis] | None = None,
                 tags: frozenset[Tag] = _NO_TAGS,
                 non_equality_tags: frozenset[Tag] = _NO_TAGS) -> None:
        if not isinstance(_container, Call):
            raise NotAnArrayError(f"a NamedCallResult belongs to a Call, not "
                                  f"a {type(_container).__name__}")
        ret = _container.function.returns.get(name)
        if ret is None:
            raise KeyError(name)
        self._container = _container
        self.name = name
        self.shape = ret.shape
        self.dtype = ret.dtype
        self._finish_init(axes, tags, non_equality_tags)

    @property
    def call(self) -> Call:
        return self._container

# {{{ tracing

_RESERVED_ARG_NAME = re.compile(r"^_pt_(\d+)$")


def _parameter_placeholder(name: str, arg: object) -> Placeholder:
    if not isinstance(arg, Array):
        raise NotAnArrayError(
            f"trace_call: argument {name!r} is a {type(arg).__name__}; only "
            "arrays can be passed to a traced function (bind other values "
            "with functools.partial)")
    return Placeholder(name, arg.shape, arg.dtype, axes=arg.axes,
                       tags=arg.tags)


class _GuessIdentifier:
    """Default of *identifier*: take the function's ``__name__``."""


def trace_call(f: Callable[..., object], *args: Array,
               identifier: Hashable | None = _GuessIdentifier,
               **kwargs: Array) -> CallResults:
    """Call *f* on placeholders standing for *args* and *kwargs*, outline
    what it returns as a :class:`FunctionDefinition`, and return the results
    of calling that definition with *args* and *kwargs*, in the structure
    *f* returned (an array, a tuple of arrays or a dict of arrays).

    Positional argument *i* becomes parameter ``in__pt_i``, keyword argument
    ``kw`` parameter ``in_kw``. *identifier* names the definition (a
    :class:`~pytato_like.tags.FunctionIdentifier` tag): by default the
    function's ``__name__``; ``None`` for no name.

    Tracing the same function on arguments of the same shapes and dtypes
    gives equal definitions, so code generation treats all such calls as
    calls of one function.
    """
    if identifier is _GuessIdentifier:
        identifier = getattr(f, "__name__", None)
    for kw in kwargs:
        if _RESERVED_ARG_NAME.match(kw):
            raise InvalidNameError(
                f"trace_call: keyword argument name {kw!r} is reserved for "
                "positional arguments")
    pos_names = [f"in__pt_{i}" for i in range(len(args))]
    kw_names = {kw: f"in_{kw}" for kw in kwargs}
    pos_placeholders = [_parameter_placeholder(n, a)
                        for n, a in zip(pos_names, args, strict=True)]
    kw_placeholders = {kw: _parameter_placeholder(kw_names[kw], a)
                       for kw, a in kwargs.items()}

    output = f(*pos_placeholders, **kw_placeholders)

    if isinstance(output, Array):
        returns: dict[str, Array] = {"_": output}
        return_type = ReturnType.ARRAY
    elif isinstance(output, tuple):
        returns = {f"_{i}": out for i, out in enumerate(output)}
        return_type = ReturnType.TUPLE_OF_ARRAYS
    elif isinstance(output, Mapping):
        returns = dict(output)
        return_type = ReturnType.DICT_OF_ARRAYS
    else:
        raise NotAnArrayError(
            f"trace_call: {getattr(f, '__name__', f)!r} returned a "
            f"{type(output).__name__}; a traced function must return an "
            "array, a tuple of arrays or a dict of arrays")
    tags = (frozenset({FunctionIdentifier(identifier)})
            if identifier is not None else _NO_TAGS)
    definition = FunctionDefinition(
        frozenset(pos_names) | frozenset(kw_names.values()), return_type,
        returns, tags=tags)
    bindings = dict(zip(pos_names, args, strict=True))
    bindings.update({kw_names[kw]: a for kw, a in kwargs.items()})
    return definition(**bindings)

# }}}

# vim: foldmethod=marker
