"""Hand-written loopy kernels as nodes of a DAG.

``call_loopy(translation_unit, bindings, entrypoint=None)`` makes a
:class:`LoopyCall`: the kernel ``translation_unit[entrypoint]`` applied to
the arrays and numbers in *bindings*. Its results are
:class:`LoopyCallResult` arrays, one per output argument of the kernel, with
the shapes the kernel declares (size arguments replaced by their bound
values) and the dtypes loopy infers from the bound arrays.

The loopy target runs the kernel as written, as one step of the program
(:mod:`pytato_like.target.loopy.external`); the NumPy target cannot run
loopy code and raises :class:`~pytato_like.diagnostic.UnsupportedArrayError`.
Mappers, equality, pickling and the visualisation treat the call through
the field table (its array bindings are its children).

.. autofunction:: call_loopy
.. autoclass:: LoopyCall
.. autoclass:: LoopyCallResult
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Number
from typing import Any

import numpy as np
from constantdict import constantdict
from pytools.tag import Tag

from pytato_like._results_node import NodeResult, ResultsNode
from pytato_like.array import (
    BINDINGS,
    VALUE,
    Array,
)
from pytato_like.diagnostic import (
    DTypeError,
    MissingInputError,
    NotAnArrayError,
    ShapeMismatchError,
    UnexpectedInputError,
)

__all__ = ["LoopyCall", "LoopyCallResult", "call_loopy"]

_NO_TAGS: frozenset[Tag] = frozenset()


def _numpy_dtype(lp_dtype: Any) -> np.dtype:
    return np.dtype(getattr(lp_dtype, "numpy_dtype", lp_dtype))


class LoopyCall(ResultsNode):
    """A call of the kernel *entrypoint* of *translation_unit*.

    .. attribute:: translation_unit

        The :class:`loopy.TranslationUnit`, with the dtypes of the bound
        arguments added and the rest inferred.

    .. attribute:: bindings

        Array argument name -> the bound array.

    .. attribute:: scalar_bindings

        Value argument name -> the bound number.

    .. attribute:: entrypoint

    A mapping from output argument names to :class:`LoopyCallResult`. Like
    a function call it is a node without a value of its own (shape ``()``,
    the empty ``void`` dtype).
    """

    _mapper_method = "map_loopy_call"
    _fields = (("translation_unit", VALUE), ("bindings", BINDINGS),
               ("scalar_bindings", VALUE), ("entrypoint", VALUE))

    def __init__(self, translation_unit: Any, bindings: Mapping[str, Array],
                 scalar_bindings: Mapping[str, Any], entrypoint: str,
                 axes: Any = None, tags: frozenset[Tag] = _NO_TAGS,
                 non_equality_tags: frozenset[Tag] = _NO_TAGS) -> None:
        self.translation_unit = translation_unit
        self.bindings = (bindings if type(bindings) is constantdict
                         else constantdict(bindings))
        self.scalar_bindings = (scalar_bindings
                                if type(scalar_bindings) is constantdict
                                else constantdict(scalar_bindings))
        self.entrypoint = entrypoint
        self._finish_results_init(axes, tags, non_equality_tags)

    @property
    def entry_kernel(self) -> Any:
        return self.translation_unit[self.entrypoint]

    @property
    def output_names(self) -> list[str]:
        return [arg.name for arg in self.entry_kernel.args if arg.is_output]

    def result_shape(self, name: str) -> tuple[int, ...]:
        from pymbolic import evaluate
        arg = self.entry_kernel.arg_dict[name]
        context = dict(self.scalar_bindings)
        try:
            return tuple(int(evaluate(d, context)) for d in (arg.shape or ()))
        except Exception as exc:
            raise ShapeMismatchError(
                f"call_loopy: the shape {arg.shape} of output '{name}' of "
                f"kernel '{self.entrypoint}' does not follow from the bound "
                f"sizes {dict(self.scalar_bindings)}: {exc}") from exc

    def _result_names(self) -> list[str]:
        return self.output_names

    def _make_result(self, name: str) -> LoopyCallResult:
        return LoopyCallResult(self, name)


class LoopyCallResult(NodeResult):
    """The output argument *name* of a :class:`LoopyCall`."""

    __slots__ = ()
    _mapper_method = "map_loopy_call_result"

    def __init__(self, _container: LoopyCall, name: str, axes: Any = None,
                 tags: frozenset[Tag] = _NO_TAGS,
                 non_equality_tags: frozenset[Tag] = _NO_TAGS) -> None:
        self._container = _container
        self.name = name
        self.shape = _container.result_shape(name)
        self.dtype = _numpy_dtype(_container.entry_kernel.arg_dict[name].dtype)
        self._finish_init(axes, tags, non_equality_tags)


#: (id of a translation unit, entrypoint, added dtypes) -> (that unit,
#: the unit with types inferred), oldest first
_TYPED_UNITS: dict[tuple, tuple[Any, Any]] = {}
_MAX_TYPED_UNITS = 64


def call_loopy(translation_unit: Any, bindings: Mapping[str, Any],
               entrypoint: str | None = None) -> LoopyCall:
    """The kernel *entrypoint* (the only one when ``None``) of the loopy
    *translation_unit* applied to *bindings*: array arguments bound to
    arrays, value arguments to numbers. Every input argument must be bound;
    no argument may be both read and written (a DAG has no state). Returns
    the :class:`LoopyCall`, a mapping from output names to arrays."""
    import loopy as lp
    if not isinstance(translation_unit, lp.TranslationUnit):
        if isinstance(translation_unit, lp.LoopKernel):
            translation_unit = lp.make_program(translation_unit)
        else:
            raise NotAnArrayError(
                f"call_loopy needs a loopy TranslationUnit, got a "
                f"{type(translation_unit).__name__}")
    if entrypoint is None:
        if len(translation_unit.entrypoints) != 1:
            raise UnexpectedInputError(
                "call_loopy: the translation unit has entrypoints "
                f"{sorted(translation_unit.entrypoints)}; name one")
        entrypoint, = translation_unit.entrypoints
    elif entrypoint not in translation_unit.entrypoints:
        raise MissingInputError(f"call_loopy: no entrypoint '{entrypoint}' "
                                f"(there are {sorted(translation_unit.entrypoints)})")
    kernel = translation_unit[entrypoint]
    arrays: dict[str, Array] = {}
    scalars: dict[str, Any] = {}
    for arg in kernel.args:
        if arg.is_input and arg.is_output:
            raise UnexpectedInputError(
                f"call_loopy: kernel '{entrypoint}' both reads and writes "
                f"'{arg.name}'; a DAG node cannot update an array in place")
        if arg.is_output:
            if arg.name in bindings:
                raise UnexpectedInputError(
                    f"call_loopy: '{arg.name}' is an output of kernel "
                    f"'{entrypoint}' and cannot be bound")
            continue
        if arg.name not in bindings:
            raise MissingInputError(f"call_loopy: kernel '{entrypoint}' reads "
                                    f"'{arg.name}', which is not bound")
        value = bindings[arg.name]
        if isinstance(arg, lp.ValueArg):
            if isinstance(value, Array) or not isinstance(value, (Number, np.generic)):
                raise DTypeError(f"call_loopy: value argument '{arg.name}' must "
                                 f"be bound to a number, got {value!r:.60}")
            scalars[arg.name] = value
        else:
            if not isinstance(value, Array):
                raise NotAnArrayError(
                    f"call_loopy: array argument '{arg.name}' must be bound to "
                    f"an array, got a {type(value).__name__}")
            arrays[arg.name] = value
    unknown = sorted(set(bindings) - set(arrays) - set(scalars))
    if unknown:
        raise UnexpectedInputError(f"call_loopy: kernel '{entrypoint}' has no "
                                   f"input argument(s) {unknown}")
    dtypes = {name: ary.dtype for name, ary in arrays.items()}
    dtypes.update({name: np.asarray(v).dtype for name, v in scalars.items()
                   if kernel.arg_dict[name].dtype is None})
    missing_dtypes = {n: d for n, d in dtypes.items()
                      if kernel.arg_dict[n].dtype is None}
    # type inference costs milliseconds: a DAG calling one kernel many
    # times infers once (keyed by identity; the entry keeps the object
    # alive so its id stays unique)
    key = (id(translation_unit), entrypoint, tuple(sorted(missing_dtypes.items())))
    cached = _TYPED_UNITS.get(key)
    if cached is not None and cached[0] is translation_unit:
        translation_unit = cached[1]
    else:
        untyped = translation_unit
        if missing_dtypes:
            translation_unit = translation_unit.with_kernel(
                lp.add_dtypes(kernel, missing_dtypes))
        translation_unit = lp.infer_unknown_types(translation_unit)
        if len(_TYPED_UNITS) >= _MAX_TYPED_UNITS:
            _TYPED_UNITS.pop(next(iter(_TYPED_UNITS)))
        _TYPED_UNITS[key] = (untyped, translation_unit)
    call = LoopyCall(translation_unit, arrays, scalars, entrypoint)
    for name in call.output_names:
        call[name]      # check the output shapes now
    for name, ary in arrays.items():
        declared = call.entry_kernel.arg_dict[name].shape
        if declared is not None:
            from pymbolic import evaluate
            try:
                shape = tuple(int(evaluate(d, dict(scalars))) for d in declared)
            except Exception:
                continue
            if shape != tuple(ary.shape):
                raise ShapeMismatchError(
                    f"call_loopy: argument '{name}' of kernel '{entrypoint}' "
                    f"has shape {ary.shape}; the kernel declares {shape}")
    return call
