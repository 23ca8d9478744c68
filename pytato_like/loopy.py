"""Hand-written loopy kernels as nodes of a DAG.

``call_loopy(translation_unit, bindings, entrypoint=None)`` makes a
:class:`LoopyCall`: the kernel ``translation_unit[entrypoint]`` applied to
the arrays and numbers in *bindings*. Its results are
:class:`LoopyCallResult` arrays, one per output argument of the kernel, with
the shapes the kernel declares (size arguments replaced by their values)
and the dtypes loopy infers from the bound arrays.

* *entrypoint* names any kernel of the translation unit: one of its
  entrypoints or a kernel in its callables table (a callee of another
  kernel); the call's unit has that kernel as its only entrypoint, and the
  kernels it calls are found through the callables table.
* A value (size) argument left unbound is solved for from the shapes of
  the bound arrays: ``x`` declared with shape ``(nelements, n)`` and bound
  to an array of shape ``(10, 4)`` gives ``nelements = 10, n = 4``.
  Affine shape expressions are solved together with :mod:`islpy`
  (``2*n + 1`` bound to 9 gives ``n = 4``); the solution must be unique.
* A value argument may be bound to a number, a 0-d NumPy array, or a 0-d
  array of the DAG (a :class:`~pytato_like.array.SizeParam` or an
  expression of one, or any 0-d array computed by the DAG): its value is
  then read when the program runs. An output shape may name such an
  argument only when it is bound to a size expression (SizeParams only),
  as a bare dimension.

The loopy target runs the kernel as written, as one step of the program
(:mod:`pytato_like.target.loopy.external`); the NumPy target runs it on the
host through loopy's C target (:mod:`pytato_like.target.host_loopy`).
Mappers, equality, pickling and the visualisation treat the call through
the field table (its array bindings are its children).

.. autofunction:: call_loopy
.. autoclass:: LoopyCall
.. autoclass:: LoopyCallResult
"""

from __future__ import annotations

from collections.abc import Mapping
from numbers import Number
from typing import TYPE_CHECKING, TypeAlias, cast

import numpy as np
import pymbolic.primitives as prim
from constantdict import constantdict
from pytools.tag import Tag

from pytato_like._results_node import NodeResult, ResultsNode
from pytato_like._traversal import depth_first
from pytato_like.array import (
    BINDINGS,
    VALUE,
    Array,
    AxesT,
    InputArgumentBase,
    ShapeComponent,
    ShapeType,
    SizeParam,
)
from pytato_like.diagnostic import (
    DTypeError,
    MissingInputError,
    NotAnArrayError,
    ShapeMismatchError,
    UnexpectedInputError,
)

if TYPE_CHECKING:
    from loopy import LoopKernel, TranslationUnit
    from loopy.kernel.array import ArrayBase
    from loopy.types import LoopyType
    from pymbolic.typing import ArithmeticExpression, Expression

__all__ = ["LoopyCall", "LoopyCallResult", "call_loopy"]

#: A number bound to a value argument (what :func:`call_loopy` accepts:
#: a :class:`numbers.Number` or NumPy scalar, not a bool).
ValueArgNumber: TypeAlias = "int | float | Number | np.generic"
#: A value argument's value: a number, or a 0-d array of the DAG read when
#: the program runs.
ValueArgValue: TypeAlias = "ValueArgNumber | Array"

_NO_TAGS: frozenset[Tag] = frozenset()


def kernel_arg_dtype(lp_dtype: LoopyType | None) -> np.dtype:
    """The NumPy dtype of a kernel argument's loopy dtype."""
    # an argument whose dtype loopy has not inferred yet has None
    if lp_dtype is None:
        raise UnexpectedInputError(
            "call_loopy: a kernel argument has no dtype yet; give it one "
            "(loopy.add_dtypes) before calling the kernel")
    return np.dtype(lp_dtype.numpy_dtype)


def _is_size_expression(ary: Array) -> bool:
    """Whether the 0-d array *ary* is computed from size parameters only
    (so it may size an array)."""
    for node, _ in depth_first([ary]):
        if isinstance(node, InputArgumentBase) and not isinstance(node, SizeParam):
            return False
    return True


class LoopyCall(ResultsNode):
    """A call of the kernel *entrypoint* of *translation_unit*.

    .. attribute:: translation_unit

        The :class:`loopy.TranslationUnit` with *entrypoint* as its only
        entrypoint, the dtypes of the bound arguments added and the rest
        inferred.

    .. attribute:: bindings

        Argument name -> the bound array: the array arguments, and the
        value arguments bound to 0-d arrays (read when the program runs).

    .. attribute:: scalar_bindings

        Value argument name -> its number (bound or inferred from shapes).

    .. attribute:: entrypoint

    A mapping from output argument names to :class:`LoopyCallResult`. Like
    a function call it is a node without a value of its own (shape ``()``,
    the empty ``void`` dtype).
    """

    _mapper_method = "map_loopy_call"
    _fields = (("translation_unit", VALUE), ("bindings", BINDINGS),
               ("scalar_bindings", VALUE), ("entrypoint", VALUE))

    def __init__(self, translation_unit: TranslationUnit,
                 bindings: Mapping[str, Array],
                 scalar_bindings: Mapping[str, ValueArgNumber], entrypoint: str,
                 axes: AxesT | None = None, tags: frozenset[Tag] = _NO_TAGS,
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
    def entry_kernel(self) -> LoopKernel:
        return self.translation_unit[self.entrypoint]

    @property
    def output_names(self) -> list[str]:
        return [arg.name for arg in self.entry_kernel.args if arg.is_output]

    @property
    def value_array_names(self) -> list[str]:
        """The value arguments bound to 0-d arrays (in :attr:`bindings`)."""
        import loopy as lp
        arg_dict = self.entry_kernel.arg_dict
        return [name for name in self.bindings
                if isinstance(arg_dict[name], lp.ValueArg)]

    def size_context(self) -> dict[str, ValueArgValue]:
        """Value argument name -> its number or its bound 0-d array."""
        context: dict[str, ValueArgValue] = dict(self.scalar_bindings)
        for name in self.value_array_names:
            context[name] = self.bindings[name]
        return context

    def result_shape(self, name: str) -> ShapeType:
        arg = self.entry_kernel.arg_dict[name]
        if arg.shape is None or not isinstance(arg.shape, tuple):
            raise ShapeMismatchError(
                f"call_loopy: output '{name}' of kernel '{self.entrypoint}' "
                "has no declared shape")
        context = self.size_context()
        shape = []
        for d in arg.shape:
            value = _evaluate_size(d, context, f"output '{name}'",
                                   self.entrypoint)
            if isinstance(value, Array):
                if not any(value is self.bindings[n]
                           for n in self.value_array_names):
                    raise ShapeMismatchError(
                        f"call_loopy: dimension {d} of output '{name}' of "
                        f"kernel '{self.entrypoint}' is an expression of "
                        "value arguments bound to arrays; only a bare bound "
                        "size (or numbers) can size an output")
                if not _is_size_expression(value):
                    raise ShapeMismatchError(
                        f"call_loopy: dimension {d} of output '{name}' of "
                        f"kernel '{self.entrypoint}' is bound to a "
                        "data-dependent array; bind it to a number or a "
                        "SizeParam expression")
            shape.append(value)
        return tuple(shape)

    def _result_names(self) -> list[str]:
        return self.output_names

    def _make_result(self, name: str) -> LoopyCallResult:
        return LoopyCallResult(self, name)


class LoopyCallResult(NodeResult):
    """The output argument *name* of a :class:`LoopyCall`."""

    __slots__ = ()
    _mapper_method = "map_loopy_call_result"

    def __init__(self, _container: LoopyCall, name: str,
                 axes: AxesT | None = None,
                 tags: frozenset[Tag] = _NO_TAGS,
                 non_equality_tags: frozenset[Tag] = _NO_TAGS) -> None:
        self._container = _container
        self.name = name
        self.shape = _container.result_shape(name)
        self.dtype = kernel_arg_dtype(_container.entry_kernel.arg_dict[name].dtype)
        self._finish_init(axes, tags, non_equality_tags)


def _evaluate_size(expr: ArithmeticExpression,
                   context: Mapping[str, ValueArgValue], what: str,
                   entrypoint: str) -> int | Array:
    """The size expression *expr* of a kernel evaluated with *context*:
    an int, or a 0-d array when it involves a value argument bound to
    one."""
    if type(expr) is int:
        return expr
    if type(expr) is prim.Variable and expr.name in context:
        value = context[expr.name]       # (the common case, made fast)
        if isinstance(value, Array) or type(value) is int:
            return value
    from pymbolic import evaluate
    try:
        value = evaluate(expr, dict(context))
    except Exception as exc:
        raise ShapeMismatchError(
            f"call_loopy: the dimension {expr} of {what} of kernel "
            f"'{entrypoint}' does not follow from the sizes "
            f"{_describe(context)}: {exc}") from exc
    if isinstance(value, Array):
        return value
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        value = int(value)
    if not isinstance(value, (int, np.integer)):
        raise ShapeMismatchError(
            f"call_loopy: the dimension {expr} of {what} of kernel "
            f"'{entrypoint}' is {value!r}, not an integer")
    return int(value)


def _describe(context: Mapping[str, ValueArgValue]
              ) -> dict[str, ValueArgNumber | str]:
    return {k: (v if not isinstance(v, Array)
                else f"<{type(v).__name__} {getattr(v, 'name', '')}>".replace(
                    " >", ">"))
            for k, v in context.items()}


# {{{ the translation unit and its entrypoint

def _kernel_names(translation_unit: TranslationUnit) -> list[str]:
    from loopy.kernel.function_interface import CallableKernel
    return sorted(name for name, clbl in translation_unit.callables_table.items()
                  if isinstance(clbl, CallableKernel) and isinstance(name, str))


def _entry_unit(translation_unit: TranslationUnit | LoopKernel,
                entrypoint: str | None) -> tuple[TranslationUnit, str]:
    """*translation_unit* as a :class:`loopy.TranslationUnit`, and the name
    of the kernel to call (checked)."""
    import loopy as lp
    if not isinstance(translation_unit, lp.TranslationUnit):
        if isinstance(translation_unit, lp.LoopKernel):
            kernel = translation_unit
            translation_unit = lp.make_program(kernel)
            if not translation_unit.entrypoints:
                translation_unit = translation_unit.with_entrypoints(
                    frozenset([kernel.name]))
        else:
            raise NotAnArrayError(
                f"call_loopy needs a loopy TranslationUnit, got a "
                f"{type(translation_unit).__name__}")
    entrypoints = translation_unit.entrypoints
    if entrypoint is None and len(entrypoints) == 1:
        entrypoint, = entrypoints
        return translation_unit, entrypoint
    if entrypoint is not None and entrypoint in entrypoints:
        return translation_unit, entrypoint
    kernels = _kernel_names(translation_unit)
    if entrypoint is None:
        named = sorted(entrypoints)
        if not named and len(kernels) == 1:
            entrypoint, = kernels
        else:
            raise UnexpectedInputError(
                f"call_loopy: the translation unit has entrypoints "
                f"{named} (kernels {kernels}); name one with "
                "entrypoint=")
    elif entrypoint not in kernels:
        raise MissingInputError(
            f"call_loopy: no kernel '{entrypoint}' in the translation unit "
            f"(entrypoints {sorted(translation_unit.entrypoints)}, kernels "
            f"{kernels})")
    return translation_unit, entrypoint

# }}}


# {{{ bindings

def _scalar_value(name: str, value: object, entrypoint: str
                  ) -> ValueArgValue:
    """*value* bound to the value argument *name*: a number (0-d NumPy
    arrays unwrapped) or a 0-d array of the DAG."""
    if isinstance(value, Array):
        if value.ndim != 0 or value.dtype.kind not in "biuf":
            raise DTypeError(
                f"call_loopy: value argument '{name}' of kernel "
                f"'{entrypoint}' must be bound to a number or a 0-d real "
                f"array, got an array of shape {value.shape}, dtype "
                f"{value.dtype}")
        return value
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (Number, np.generic)):
        raise DTypeError(f"call_loopy: value argument '{name}' of kernel "
                         f"'{entrypoint}' must be bound to a number, got "
                         f"{value!r:.60}")
    return value


def _classify_bindings(kernel: LoopKernel, entrypoint: str,
                       bindings: Mapping[str, object]
                       ) -> tuple[dict[str, Array], dict[str, ValueArgValue],
                                  list[str]]:
    """``(array bindings, value bindings, unbound value arguments)``; value
    bindings are numbers or 0-d arrays."""
    import loopy as lp
    arrays: dict[str, Array] = {}
    scalars: dict[str, ValueArgValue] = {}
    unbound: list[str] = []
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
            if isinstance(arg, lp.ValueArg):
                unbound.append(arg.name)
                continue
            raise MissingInputError(f"call_loopy: kernel '{entrypoint}' reads "
                                    f"'{arg.name}', which is not bound")
        value = bindings[arg.name]
        if isinstance(arg, lp.ValueArg):
            scalars[arg.name] = _scalar_value(arg.name, value, entrypoint)
        else:
            if not isinstance(value, Array):
                raise NotAnArrayError(
                    f"call_loopy: array argument '{arg.name}' of kernel "
                    f"'{entrypoint}' must be bound to an array, got a "
                    f"{type(value).__name__}")
            arrays[arg.name] = value
    unknown = sorted(set(bindings) - set(arrays) - set(scalars))
    if unknown:
        raise UnexpectedInputError(f"call_loopy: kernel '{entrypoint}' has no "
                                   f"input argument(s) {unknown}")
    return arrays, scalars, unbound

# }}}


# {{{ value arguments from the shapes of the bound arrays

def _isl_text(expr: ArithmeticExpression, names: Mapping[str, str]
              ) -> str | None:
    """*expr* in isl's syntax with variables renamed by *names*; ``None``
    when it is not quasi-affine in them."""
    if isinstance(expr, (int, np.integer)) and not isinstance(expr, bool):
        return str(int(expr))
    if isinstance(expr, prim.Variable):
        return names.get(expr.name)
    if isinstance(expr, prim.Sum):
        parts = [_isl_text(c, names) for c in expr.children]
        return None if None in parts else "(" + " + ".join(
            p for p in parts if p is not None) + ")"
    if isinstance(expr, prim.Product):
        consts = [c for c in expr.children if isinstance(c, (int, np.integer))]
        others = [c for c in expr.children
                  if not isinstance(c, (int, np.integer))]
        if len(others) > 1:
            return None
        factor = int(np.prod([int(c) for c in consts])) if consts else 1
        if not others:
            return str(factor)
        inner = _isl_text(others[0], names)
        return None if inner is None else f"{factor}*({inner})"
    if isinstance(expr, (prim.FloorDiv, prim.Remainder)):
        den = expr.denominator
        if not isinstance(den, (int, np.integer)) or int(den) <= 0:
            return None
        num = _isl_text(expr.numerator, names)
        if num is None:
            return None
        if isinstance(expr, prim.FloorDiv):
            return f"floor({num}/{int(den)})"
        return f"({num} mod {int(den)})"
    return None


def _solve_affine(equations: list[tuple[str, int, ArithmeticExpression,
                                        ShapeComponent]],
                  unknown: set[str], entrypoint: str) -> dict[str, int]:
    """The unknowns that *equations* (``(argument, axis, size expression,
    extent)``) determine uniquely, solved with isl."""
    import islpy as isl
    from loopy.symbolic import get_dependencies
    names: dict[str, str] = {}
    constraints = []
    used = []
    for arg_name, axis, expr, extent in equations:
        deps = set(get_dependencies(expr))
        if not deps <= unknown:
            continue
        for dep in sorted(deps):
            names.setdefault(dep, f"_v{len(names)}")
        text = _isl_text(expr, names)
        if text is None:
            continue
        constraints.append(f"{text} = {extent}")
        used.append((arg_name, axis, expr, extent))
    if not constraints:
        return {}
    variables = list(names)
    constraints += [f"{names[v]} >= 0" for v in variables]
    try:
        solutions = isl.Set("{ [%s] : %s }" % (
            ", ".join(names[v] for v in variables), " and ".join(constraints)))
    except isl.Error:
        return {}
    if solutions.is_empty():
        described = "; ".join(f"dimension {axis} of '{a}': {e} = {n}"
                              for a, axis, e, n in used)
        raise ShapeMismatchError(
            f"call_loopy: no sizes of kernel '{entrypoint}' fit the shapes "
            f"of the bound arrays ({described})")
    solved = {}
    for i, v in enumerate(variables):
        low, high = solutions.dim_min_val(i), solutions.dim_max_val(i)
        if low.is_int() and high.is_int() and low.to_python() == high.to_python():
            solved[v] = int(low.to_python())
    return solved


def _infer_value_args(kernel: LoopKernel, entrypoint: str,
                      arrays: Mapping[str, Array],
                      known: Mapping[str, ValueArgValue], unbound: list[str]
                      ) -> dict[str, int | Array]:
    """Values of the *unbound* value arguments that follow from the shapes
    of the bound *arrays* (ints, or arrays for symbolic extents)."""
    from loopy.symbolic import get_dependencies
    from pymbolic import substitute
    unknown = set(unbound)
    if not unknown:
        return {}
    equations: list[tuple[str, int, ArithmeticExpression,
                          ShapeComponent]] = []
    for name, ary in arrays.items():
        declared = kernel.arg_dict[name].shape
        if not isinstance(declared, tuple):
            continue
        if len(declared) != ary.ndim:
            raise ShapeMismatchError(
                f"call_loopy: argument '{name}' of kernel '{entrypoint}' has "
                f"shape {ary.shape}; the kernel declares {len(declared)} "
                f"dimensions {declared}")
        equations.extend((name, axis, d, extent)
                         for axis, (d, extent) in enumerate(
                             zip(declared, ary.shape, strict=True)))
    # bound numbers are NumPy or Python scalars: pymbolic constants
    numbers = {k: cast("Expression", v) for k, v in known.items()
               if not isinstance(v, Array)}
    found: dict[str, int | Array] = {}
    while unknown:
        progress = False
        pending = []
        for arg_name, axis, expr, extent in equations:
            if not isinstance(expr, (int, np.integer)):
                assigned: dict[str, Expression] = {
                    **numbers, **{k: v for k, v in found.items()
                                  if not isinstance(v, Array)}}
                expr = substitute(expr, assigned)
            deps = set(get_dependencies(expr)) & unknown
            if not deps:
                continue
            if isinstance(expr, prim.Variable):
                found[expr.name] = (int(extent) if not isinstance(extent, Array)
                                    else extent)
                unknown.discard(expr.name)
                progress = True
                continue
            pending.append((arg_name, axis, expr, extent))
        equations = pending
        if progress:
            continue
        solved = _solve_affine(
            [eq for eq in equations if not isinstance(eq[3], Array)],
            unknown, entrypoint)
        if not solved:
            break
        found.update(solved)
        unknown -= set(solved)
    return found

# }}}


#: (id of a translation unit, entrypoint, added dtypes) -> (that unit,
#: the unit with types inferred), oldest first
_TYPED_UNITS: dict[tuple[int, str, tuple[tuple[str, np.dtype], ...]],
                   tuple[TranslationUnit, TranslationUnit]] = {}
#: id of a typed unit -> (the typed unit, the unit it was inferred from:
#: entrypoint set, dtypes added, target unchanged), for targets that
#: retarget it (:mod:`pytato_like.target.host_loopy`)
SOURCE_UNITS: dict[int, tuple[TranslationUnit, TranslationUnit]] = {}
_MAX_TYPED_UNITS = 64


def _typed_unit(translation_unit: TranslationUnit, entrypoint: str,
                missing_dtypes: Mapping[str, np.dtype]) -> TranslationUnit:
    import loopy as lp
    # type inference costs milliseconds: a DAG calling one kernel many
    # times infers once (keyed by identity; the entry keeps the object
    # alive so its id stays unique)
    key = (id(translation_unit), entrypoint,
           tuple(sorted(missing_dtypes.items())))
    cached = _TYPED_UNITS.get(key)
    if cached is not None and cached[0] is translation_unit:
        return cached[1]
    source = translation_unit
    if source.entrypoints != frozenset([entrypoint]):
        source = source.with_entrypoints(frozenset([entrypoint]))
    if missing_dtypes:
        source = source.with_kernel(lp.add_dtypes(source[entrypoint],
                                                  dict(missing_dtypes)))
    typed = lp.infer_unknown_types(source)
    if len(_TYPED_UNITS) >= _MAX_TYPED_UNITS:
        _, old = _TYPED_UNITS.pop(next(iter(_TYPED_UNITS)))
        SOURCE_UNITS.pop(id(old), None)
    _TYPED_UNITS[key] = (translation_unit, typed)
    SOURCE_UNITS[id(typed)] = (typed, source)
    return typed


def call_loopy(translation_unit: TranslationUnit | LoopKernel,
               bindings: Mapping[str, object],
               entrypoint: str | None = None) -> LoopyCall:
    """The kernel *entrypoint* of the loopy *translation_unit* applied to
    *bindings*: array arguments bound to arrays, value arguments to numbers
    or 0-d arrays (a :class:`~pytato_like.array.SizeParam`, a computed
    scalar). *entrypoint* may be ``None`` when the unit has one entrypoint,
    or name any kernel of the unit (a callee too).

    Every array input must be bound; a value argument left unbound is
    solved for from the shapes of the bound arrays. No argument may be both
    read and written (a DAG has no state). Returns the :class:`LoopyCall`,
    a mapping from output names to arrays."""
    translation_unit, entrypoint = _entry_unit(translation_unit, entrypoint)
    kernel = translation_unit[entrypoint]
    arrays, scalars, unbound = _classify_bindings(kernel, entrypoint, bindings)
    inferred = _infer_value_args(kernel, entrypoint, arrays, scalars, unbound)
    missing = [name for name in unbound if name not in inferred]
    if missing:
        raise MissingInputError(
            f"call_loopy: kernel '{entrypoint}' reads '{missing[0]}', which is "
            "not bound and does not follow from the shapes of the bound "
            f"arrays {({n: a.shape for n, a in arrays.items()})}")
    scalars.update(inferred)
    numbers = {n: v for n, v in scalars.items() if not isinstance(v, Array)}
    value_arrays = {n: v for n, v in scalars.items() if isinstance(v, Array)}

    dtypes = {name: ary.dtype for name, ary in arrays.items()}
    dtypes.update({name: ary.dtype for name, ary in value_arrays.items()})
    dtypes.update({name: np.asarray(v).dtype for name, v in numbers.items()})
    missing_dtypes = {n: d for n, d in dtypes.items()
                      if kernel.arg_dict[n].dtype is None}
    typed = _typed_unit(translation_unit, entrypoint, missing_dtypes)
    call = LoopyCall(typed, {**arrays, **value_arrays}, numbers, entrypoint)
    for name in call.output_names:
        call[name]      # check the output shapes now
    context = call.size_context()
    for name, ary in arrays.items():
        declared = call.entry_kernel.arg_dict[name].shape
        if not isinstance(declared, tuple):
            continue
        if len(declared) != ary.ndim:
            raise ShapeMismatchError(
                f"call_loopy: argument '{name}' of kernel '{entrypoint}' has "
                f"shape {ary.shape}; the kernel declares {declared}")
        for d, extent in zip(declared, ary.shape, strict=True):
            try:
                want = _evaluate_size(d, context, f"argument '{name}'",
                                      entrypoint)
            except ShapeMismatchError:
                continue    # (the kernel checks what it can)
            mismatch = (want != extent if isinstance(want, int)
                        and isinstance(extent, int)
                        else (isinstance(want, Array)
                              and isinstance(extent, Array)
                              and not want == extent))
            if mismatch:
                shape = tuple(
                    _evaluate_size(e, context, f"argument '{name}'", entrypoint)
                    for e in declared)
                raise ShapeMismatchError(
                    f"call_loopy: argument '{name}' of kernel '{entrypoint}' "
                    f"has shape {ary.shape}; the kernel declares {shape}")
    return call
