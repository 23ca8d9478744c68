"""Python source for a DAG, written against a NumPy-like module.

:func:`generate_numpy_like` turns a DAG into the source of one function
(``def <function_name>(*, <inputs>)``) and binds it with a
:class:`~pytato_like.target.python.NumpyLikePythonTarget`. How:

1. Order the nodes children first (:func:`~pytato_like._traversal.
   topological_order`: iterative, so any DAG depth works) and give each
   input its own name (placeholders and size parameters keep theirs, they
   are the function's keyword parameters; data wrappers become bound
   parameters).
2. Emit one assignment per computing node, reading its children's
   variables: a node never recurses into its operands, so code generation
   is linear in the number of nodes. Named arrays and device transfers are
   aliases of their operand and emit nothing.
3. An :class:`~pytato_like.IndexLambda` is written vectorised, as the NumPy
   target evaluates it: index variables become broadcast ``arange``\\ s,
   plain subscripts become views (transposed and expanded to the lambda's
   index space), other subscripts become clipped gathers, a reduction
   appends axes and reduces them. Every dtype conversion is explicit in the
   IR, so the code follows NumPy's promotion; a result whose dtype is not
   known to be the node's is converted to it.
4. Nodes computing size expressions (shape components) are evaluated with
   NumPy itself (``_pt_np``), so that shapes stay concrete Python integers,
   also under ``jax.jit`` (size parameters are static arguments there).

Distributed sends and receives have no meaning inside one Python function
and raise :class:`~pytato_like.diagnostic.UnsupportedArrayError`.

.. autofunction:: generate_numpy_like
"""

from __future__ import annotations

import keyword
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias, cast

import numpy as np
import pymbolic.primitives as prim

from pytato_like._traversal import topological_order
from pytato_like.array import (
    Array,
    DataWrapper,
    DictOfNamedArrays,
    Einsum,
    EinsumElementwiseAxis,
    IndexLambda,
    NormalizedSlice,
    Placeholder,
    SizeParam,
    children_of,
)
from pytato_like.cmath import C99_TO_NUMPY
from pytato_like.diagnostic import (
    InvalidNameError,
    NameClashError,
    UnknownIndexLambdaExpr,
    UnsupportedArrayError,
)
from pytato_like.scalar_expr import C99_FUNCTION_PREFIX
from pytato_like.target import gather_program_inputs, normalize_outputs
from pytato_like.utils import are_shape_components_equal

if TYPE_CHECKING:
    from pymbolic.typing import Expression

#: a literal of an index lambda's expression: a Python or NumPy scalar
ScalarConstant: TypeAlias = "np.generic | int | float | complex | bool"

logger = logging.getLogger("pytato_like")

#: Name under which the generated code imports :mod:`numpy` (host-side size
#: arithmetic and typed constants of host nodes).
HOST_NUMPY = "_pt_np"

_REDUCTION_FUNCTIONS = {"sum": "sum", "product": "prod", "max": "max",
                        "min": "min", "all": "all", "any": "any"}

_COMPARISON_FUNCTIONS = {"<": "less", "<=": "less_equal", ">": "greater",
                         ">=": "greater_equal", "==": "equal", "!=": "not_equal"}

_EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


# {{{ literals

def _float_literal(value: float) -> str:
    if np.isfinite(value):
        return repr(float(value))
    return f'float("{value}")'


def _scalar_literal(value: ScalarConstant, module: str) -> str:
    """Source for the constant *value*: Python scalars as they are (weakly
    typed, as in the IR), NumPy scalars with their dtype."""
    if isinstance(value, (bool, np.bool_)):
        text = "True" if value else "False"
        return f"{module}.bool_({text})" if isinstance(value, np.bool_) else text
    if isinstance(value, np.generic):
        dtype = value.dtype
        if dtype.kind in "iu":
            text = repr(int(value))
        elif dtype.kind == "f":
            text = _float_literal(float(value))
        elif dtype.kind == "c":
            text = (f"complex({_float_literal(float(value.real))}, "
                    f"{_float_literal(float(value.imag))})")
        else:
            raise UnknownIndexLambdaExpr(
                f"cannot write a constant of dtype {dtype} into Python source")
        return f"{module}.{dtype.name}({text})"
    if isinstance(value, int):
        return repr(value)
    if isinstance(value, float):
        return _float_literal(value)
    if isinstance(value, complex):
        return f"complex({_float_literal(value.real)}, {_float_literal(value.imag)})"
    raise UnknownIndexLambdaExpr(
        f"cannot write a constant {value!r} of type {type(value).__name__} "
        "into Python source")


def _tuple_source(items: list[str]) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return f"({', '.join(items)})"


def _astype(module: str, src: str, from_dtype: np.dtype | None,
            to_dtype: np.dtype, scalar: bool) -> str:
    """Source converting *src* (of *from_dtype*, None if unknown) to
    *to_dtype*. Complex to non-complex keeps the real part explicitly, as
    NumPy's cast does (JAX refuses the implicit discard)."""
    if to_dtype.kind != "c" and (from_dtype is None or from_dtype.kind == "c"):
        src = f"{module}.real({src})"
    elif scalar:
        src = f"{module}.asarray({src})"
    if from_dtype is not None and from_dtype.kind == "f" and to_dtype.kind in "iu" \
            and (to_dtype.itemsize < 4 or to_dtype.kind == "u"):
        # NumPy's C cast: narrow types through int32, unsigned 32/64-bit
        # ones through int64, then wrapping (JAX would saturate)
        via = "int32" if to_dtype.itemsize < 4 else "int64"
        src = f"{src}.astype('{via}')"
    return f"{src}.astype('{to_dtype.name}')"


def _constant_dtype(value: ScalarConstant) -> np.dtype | None:
    if isinstance(value, np.generic):
        return value.dtype
    return None

# }}}


# {{{ scalar expressions of index lambdas

@dataclass(frozen=True)
class _Piece:
    """A generated subexpression: its source, its dtype when known, and
    along which axes of the index space it has full extent (all other axes
    have extent 1). ``scalar`` pieces have no axes at all (0-d)."""

    src: str
    dtype: np.dtype | None
    axes: frozenset[int]
    scalar: bool
    constant: ScalarConstant | None = None  # the value, for literals

    @property
    def is_constant(self) -> bool:
        return self.constant is not None


_NO_AXES: frozenset[int] = frozenset()

# kinds of array dtypes that a weak Python scalar of each type leaves alone
# (NumPy 2 / NEP 50: int8 array + 1 is int8, int8 array + 1.0 is float64)
_WEAK_SCALAR_KEEPS = {int: "iuf" + "c", float: "fc", complex: "c"}


def _common_dtype(pieces: list[_Piece]) -> np.dtype | None:
    """The dtype of an arithmetic combination of *pieces* of one dtype,
    weak Python scalars aside; None when not known."""
    dtypes = {p.dtype for p in pieces if type(p.constant) not in _WEAK_SCALAR_KEEPS}
    if len(dtypes) != 1:
        return None
    (dtype,) = dtypes
    if dtype is None:
        return None
    for p in pieces:
        keeps = _WEAK_SCALAR_KEEPS.get(type(p.constant))
        if keeps is not None and dtype.kind not in keeps:
            return None
    return dtype


class _ScalarExpressionWriter:
    """Writes one index lambda's scalar expression as vectorised source over
    the lambda's whole index space (mirrors the NumPy target's evaluator).

    The space is a list of ``(extent, source)`` pairs, *extent* an int when
    known at generation time (else None); reductions append axes while
    their body is written."""

    def __init__(self, module: str, bindings: dict[str, tuple[str, Array]],
                 space: list[tuple[int | None, str]], new_temporary, statements: list[str],
                 dim_source):
        self.m = module
        self.dim_source = dim_source
        self.bindings = bindings
        self.space = list(space)
        self.var_axis: dict[str, int] = {f"_{i}": i for i in range(len(space))}
        self.var_offset: dict[str, str] = {}
        self.new_temporary = new_temporary
        self.statements = statements
        self._grids: dict[tuple, str] = {}

    def rec(self, expr: Expression) -> _Piece:
        if isinstance(expr, prim.ExpressionNode):
            method = getattr(self, expr.mapper_method, None)
            if method is None:
                raise UnknownIndexLambdaExpr(
                    f"cannot write {type(expr).__name__} expression {expr!r} "
                    "as Python source")
            return method(expr)
        if isinstance(expr, (np.generic, int, float, complex, bool)):
            return _Piece(_scalar_literal(expr, self.m), _constant_dtype(expr),
                          _NO_AXES, True, expr)
        raise UnknownIndexLambdaExpr(
            f"cannot write {expr!r} of type {type(expr).__name__} as Python source")

    # {{{ shapes of the index space

    def _expand(self, src: str, axes: list[int]) -> str:
        """*src*, whose axes are the space axes *axes* in increasing order,
        with unit axes inserted for the other space axes."""
        if len(axes) == len(self.space):
            return src
        key = ", ".join(":" if i in axes else "None" for i in range(len(self.space)))
        return f"{src}[{key}]"

    def _full(self, piece: _Piece) -> str:
        """*piece* broadcast to the whole current space."""
        if not piece.scalar and len(piece.axes) == len(self.space):
            return piece.src
        shape = _tuple_source([src for _, src in self.space])
        return f"{self.m}.broadcast_to({piece.src}, {shape})"

    # }}}

    # {{{ leaves

    def _index_grid(self, name: str) -> _Piece:
        axis = self.var_axis[name]
        offset = self.var_offset.get(name)
        key = (axis, self.space[axis][1], offset)
        var = self._grids.get(key)
        if var is None:
            grid = f"{self.m}.arange({self.space[axis][1]}, dtype='int64')"
            if offset is not None:
                grid = f"({grid} + {offset})"
            var = self.new_temporary("_pt_idx")
            self.statements.append(f"{var} = {grid}")
            self._grids[key] = var
        return _Piece(self._expand(var, [axis]), np.dtype(np.int64),
                      frozenset([axis]), False)

    def map_variable(self, expr: prim.Variable) -> _Piece:
        name = expr.name
        if name in self.var_axis:
            return self._index_grid(name)
        try:
            var, ary = self.bindings[name]
        except KeyError:
            raise UnknownIndexLambdaExpr(
                f"index lambda refers to unknown variable '{name}'") from None
        if ary.ndim != 0:
            raise UnknownIndexLambdaExpr(
                f"binding '{name}' of shape {ary.shape} used without subscript")
        return _Piece(var, ary.dtype, _NO_AXES, True)

    def map_subscript(self, expr: prim.Subscript) -> _Piece:
        # index lambdas subscript only named bindings (Variables)
        name = cast("prim.Variable", expr.aggregate).name
        var, ary = self.bindings[name]
        index = expr.index if isinstance(expr.index, tuple) else (expr.index,)
        if len(index) != ary.ndim:
            raise UnknownIndexLambdaExpr(
                f"subscript {name}{list(index)} has {len(index)} indices for a "
                f"binding of shape {ary.shape}")
        view = self._subscript_as_view(var, ary, index)
        if view is not None:
            return view
        if any(isinstance(d, int) and d == 0 for d in ary.shape):
            # nothing to read; the lambda can only read it under an untaken
            # branch (the NumPy target reads zeros too)
            return _Piece(f"{self.m}.zeros((), '{ary.dtype.name}')", ary.dtype,
                          _NO_AXES, True)
        keys = []
        axes: frozenset[int] = _NO_AXES
        scalar = True
        for idx, dim in zip(index, ary.shape, strict=True):
            piece = self.rec(idx)
            # Out-of-range entries are only read under an If whose branch is
            # not taken (e.g. padding): clip so the gather stays valid.
            if isinstance(piece.constant, (int, np.integer)) and isinstance(dim, int):
                keys.append(repr(min(max(int(piece.constant), 0), max(dim - 1, 0))))
                continue
            src = piece.src
            if piece.dtype != np.dtype(np.int64):
                src = f"{self.m}.asarray({src}).astype('int64')"
            upper = (repr(max(dim - 1, 0)) if isinstance(dim, int)
                     else f"max({self.dim_source(dim)} - 1, 0)")
            keys.append(f"{self.m}.clip({src}, 0, {upper})")
            axes |= piece.axes
            scalar = scalar and piece.scalar
        return _Piece(f"{var}[{', '.join(keys)}]", ary.dtype, axes, scalar)

    def _subscript_as_view(self, var: str, ary: Array, index) -> _Piece | None:
        basic: list[str] = []
        axes: list[int] = []
        for idx, dim in zip(index, ary.shape, strict=True):
            if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
                if not (isinstance(dim, int) and 0 <= idx < dim):
                    return None
                basic.append(repr(int(idx)))
            elif (isinstance(idx, prim.Variable) and idx.name in self.var_axis
                  and idx.name not in self.var_offset):
                extent = self.space[self.var_axis[idx.name]][0]
                if extent is None or not are_shape_components_equal(extent, dim):
                    return None
                basic.append(":")
                axes.append(self.var_axis[idx.name])
            else:
                return None
        if len(set(axes)) != len(axes):
            return None
        src = var
        if any(b != ":" for b in basic):
            src = f"{var}[{', '.join(basic)}]"
        order = sorted(range(len(axes)), key=axes.__getitem__)
        if order != list(range(len(axes))):
            src = f"{src}.transpose({_tuple_source([str(i) for i in order])})"
        sorted_axes = sorted(axes)
        if not sorted_axes:
            return _Piece(src, ary.dtype, _NO_AXES, True)
        return _Piece(self._expand(src, sorted_axes), ary.dtype,
                      frozenset(sorted_axes), False)

    def map_nan(self, expr) -> _Piece:
        return _Piece(f"{self.m}.nan", None, _NO_AXES, True)

    # }}}

    # {{{ operations

    def _combine(self, pieces: list[_Piece], src: str,
                 dtype: np.dtype | None | str = "same") -> _Piece:
        if dtype == "same":
            dtype = _common_dtype(pieces)
        axes = frozenset().union(*(p.axes for p in pieces))
        return _Piece(src, cast("np.dtype | None", dtype), axes,
                      all(p.scalar for p in pieces))

    def _operator(self, children, op: str) -> _Piece:
        pieces = [self.rec(c) for c in children]
        return self._combine(pieces, "(" + f" {op} ".join(p.src for p in pieces) + ")")

    def _fold(self, children, function: str, dtype="same") -> _Piece:
        pieces = [self.rec(c) for c in children]
        src = pieces[0].src
        for p in pieces[1:]:
            src = f"{self.m}.{function}({src}, {p.src})"
        return self._combine(pieces, src, dtype)

    def map_sum(self, expr) -> _Piece:
        return self._operator(expr.children, "+")

    def map_product(self, expr) -> _Piece:
        return self._operator(expr.children, "*")

    def _binary(self, function: str, a, b, dtype="same") -> _Piece:
        return self._fold((a, b), function, dtype)

    def map_quotient(self, expr) -> _Piece:
        return self._binary("true_divide", expr.numerator, expr.denominator, None)

    def map_floor_div(self, expr) -> _Piece:
        return self._binary("floor_divide", expr.numerator, expr.denominator)

    def map_remainder(self, expr) -> _Piece:
        return self._binary("remainder", expr.numerator, expr.denominator)

    def map_power(self, expr) -> _Piece:
        return self._binary("power", expr.base, expr.exponent, None)

    def map_left_shift(self, expr) -> _Piece:
        return self._binary("left_shift", expr.shiftee, expr.shift)

    def map_right_shift(self, expr) -> _Piece:
        return self._binary("right_shift", expr.shiftee, expr.shift)

    def map_bitwise_not(self, expr) -> _Piece:
        p = self.rec(expr.child)
        return self._combine([p], f"{self.m}.invert({p.src})")

    def map_bitwise_and(self, expr) -> _Piece:
        return self._fold(expr.children, "bitwise_and")

    def map_bitwise_or(self, expr) -> _Piece:
        return self._fold(expr.children, "bitwise_or")

    def map_bitwise_xor(self, expr) -> _Piece:
        return self._fold(expr.children, "bitwise_xor")

    def map_comparison(self, expr) -> _Piece:
        return self._binary(_COMPARISON_FUNCTIONS[expr.operator], expr.left,
                            expr.right, np.dtype(bool))

    def map_logical_not(self, expr) -> _Piece:
        p = self.rec(expr.child)
        return self._combine([p], f"{self.m}.logical_not({p.src})", np.dtype(bool))

    def map_logical_and(self, expr) -> _Piece:
        return self._fold(expr.children, "logical_and", np.dtype(bool))

    def map_logical_or(self, expr) -> _Piece:
        return self._fold(expr.children, "logical_or", np.dtype(bool))

    def map_if(self, expr) -> _Piece:
        cond, then, else_ = (self.rec(expr.condition), self.rec(expr.then),
                             self.rec(expr.else_))
        dtype = then.dtype if then.dtype == else_.dtype else None
        return self._combine([cond, then, else_],
                             f"{self.m}.where({cond.src}, {then.src}, {else_.src})",
                             dtype)

    def map_min(self, expr) -> _Piece:
        return self._fold(expr.children, "minimum")

    def map_max(self, expr) -> _Piece:
        return self._fold(expr.children, "maximum")

    def map_call(self, expr) -> _Piece:
        name = getattr(expr.function, "name", "")
        ufunc = (C99_TO_NUMPY.get(name[len(C99_FUNCTION_PREFIX):])
                 if name.startswith(C99_FUNCTION_PREFIX) else None)
        if ufunc is None:
            raise UnknownIndexLambdaExpr(f"unknown function '{name}' in index lambda")
        pieces = [self.rec(p) for p in expr.parameters]
        args = ", ".join(p.src for p in pieces)
        dtype = np.dtype(bool) if ufunc is np.isnan else None
        return self._combine(pieces, f"{self.m}.{ufunc.__name__}({args})", dtype)

    def map_type_cast(self, expr) -> _Piece:
        inner = self.rec(expr.inner_expr)
        dtype = np.dtype(expr.dtype)
        if inner.dtype == dtype:
            return inner
        if inner.is_constant:
            value = np.asarray(inner.constant)
            if dtype.kind != "c":
                value = value.real
            # (indexing a 0-d array with () gives a NumPy scalar)
            scalar = cast("np.generic", value.astype(dtype)[()])
            return _Piece(_scalar_literal(scalar, self.m), dtype, _NO_AXES, True,
                          scalar)
        src = _astype(self.m, inner.src, inner.dtype, dtype, inner.scalar)
        return _Piece(src, dtype, inner.axes, inner.scalar)

    def _integer_source(self, expr) -> tuple[int | None, str]:
        """A reduction bound as (its value when static, its source)."""
        if isinstance(expr, (int, np.integer)):
            return int(expr), repr(int(expr))
        # bounds are size arithmetic: written with NumPy so that they stay
        # concrete under jax.jit (size parameters are static there)
        module, self.m = self.m, HOST_NUMPY
        try:
            return None, f"int({self.rec(expr).src})"
        finally:
            self.m = module

    def map_reduce(self, expr) -> _Piece:
        function = _REDUCTION_FUNCTIONS.get(getattr(expr.op, "name", ""))
        if function is None:
            raise UnknownIndexLambdaExpr(f"unknown reduction {expr.op!r}")
        first_axis = len(self.space)
        names = list(expr.bounds)
        for name in names:
            (lo, lo_src), (hi, hi_src) = (self._integer_source(b)
                                          for b in expr.bounds[name])
            if lo is not None and hi is not None:
                extent: int | None = max(hi - lo, 0)
                extent_src = repr(extent)
            else:
                extent = None
                extent_src = (f"max({hi_src}, 0)" if lo == 0
                              else f"max({hi_src} - {lo_src}, 0)")
            self.var_axis[name] = len(self.space)
            if lo != 0:
                self.var_offset[name] = lo_src
            self.space.append((extent, extent_src))
        try:
            inner = self.rec(expr.inner_expr)
            full = self._full(inner)
            axes = _tuple_source([str(i) for i in range(first_axis, len(self.space))])
        finally:
            for name in names:
                del self.var_axis[name]
                self.var_offset.pop(name, None)
            del self.space[first_axis:]
            # grids of the reduction axes are not valid outside it
            self._grids = {k: v for k, v in self._grids.items() if k[0] < first_axis}
        dtype = inner.dtype if function in ("max", "min") else (
            np.dtype(bool) if function in ("all", "any") else None)
        return _Piece(f"{self.m}.{function}({full}, axis={axes})", dtype,
                      frozenset(range(first_axis)), first_axis == 0)

    # }}}

# }}}


# {{{ node code generation

class _CodeGenerator:
    """Emits the statements of the generated function, one node at a time
    (every child already has its variable)."""

    def __init__(self, module: str, name_gen, host_nodes: set[int]) -> None:
        self.device_module = module
        self.name_gen = name_gen
        self.host_nodes = host_nodes
        self.var: dict[int, str] = {}
        self.lines: list[str] = []
        self.arg_names: set[str] = set()
        self.bound_arguments: dict[str, object] = {}

    def module_for(self, node: Array) -> str:
        return HOST_NUMPY if id(node) in self.host_nodes else self.device_module

    def dim_source(self, dim: int | Array) -> str:
        if isinstance(dim, Array):
            return f"int({self.var[id(dim)]})"
        return repr(int(dim))

    def shape_source(self, shape) -> str:
        return _tuple_source([self.dim_source(d) for d in shape])

    def assign(self, node: Array, rhs: str, prefix: str = "_pt_tmp") -> None:
        lhs = self.name_gen(prefix)
        self.lines.append(f"{lhs} = {rhs}")
        self.var[id(node)] = lhs

    def __call__(self, node: Array) -> None:
        method = getattr(self, node._mapper_method, None)
        if method is None:
            raise UnsupportedArrayError(
                f"the Python targets cannot generate code for a "
                f"{type(node).__name__} of shape {node.shape}, dtype {node.dtype}")
        method(node)

    # {{{ inputs

    def map_placeholder(self, node: Placeholder) -> None:
        self.arg_names.add(node.name)
        self.var[id(node)] = node.name

    def map_size_param(self, node: SizeParam) -> None:
        self.arg_names.add(node.name)
        self.var[id(node)] = node.name

    def map_data_wrapper(self, node: DataWrapper) -> None:
        name = node.name if node.name is not None else self.name_gen("_pt_data")
        if name in self.bound_arguments and self.bound_arguments[name] is not node.data:
            raise NameClashError(
                f"two data wrappers share the name '{name}'")
        self.arg_names.add(name)
        self.bound_arguments[name] = node.data
        self.var[id(node)] = name

    # }}}

    # {{{ computing nodes

    def map_index_lambda(self, node: IndexLambda) -> None:
        m = self.module_for(node)
        bindings = {name: (self.var[id(ary)], ary)
                    for name, ary in node.bindings.items()}
        space = [(d if isinstance(d, int) else d, self.dim_source(d))
                 for d in node.shape]
        writer = _ScalarExpressionWriter(m, bindings, space, self.name_gen,
                                         self.lines, self.dim_source)
        piece = writer.rec(node.expr)
        src = piece.src
        if piece.dtype != node.dtype:
            src = _astype(m, src, piece.dtype, node.dtype, piece.scalar)
        elif node.ndim == 0 and piece.scalar:
            src = f"{m}.asarray({src})"
        if node.ndim and (piece.scalar or len(piece.axes) != node.ndim):
            src = f"{m}.broadcast_to({src}, {self.shape_source(node.shape)})"
        self.assign(node, src)

    def map_einsum(self, node: Einsum) -> None:
        m = self.module_for(node)
        extents = node._get_reduction_extents()
        n_out = node.ndim
        specs, args = [], []
        for acc, arg in zip(node.access_descriptors, node.args, strict=True):
            spec = ""
            full_shape = []
            for descr in acc:
                if isinstance(descr, EinsumElementwiseAxis):
                    spec += _EINSUM_LETTERS[descr.dim]
                    full_shape.append(node.shape[descr.dim])
                else:
                    spec += _EINSUM_LETTERS[n_out + descr.dim]
                    full_shape.append(extents[descr])
            src = self.var[id(arg)]
            if arg.dtype != node.dtype:
                src = _astype(m, src, arg.dtype, node.dtype, False)
            if any(d is not f and not (isinstance(d, int) and isinstance(f, int)
                                       and d == f)
                   for d, f in zip(arg.shape, full_shape, strict=True)):
                # NumPy broadcasts unit axes against longer ones
                src = f"{m}.broadcast_to({src}, {self.shape_source(full_shape)})"
            specs.append(spec)
            args.append(src)
        subscripts = f"{','.join(specs)}->{_EINSUM_LETTERS[:n_out]}"
        self.assign(node, f"{m}.einsum({subscripts!r}, {', '.join(args)})")

    def map_reshape(self, node) -> None:
        m = self.module_for(node)
        order = ", order='F'" if node.order == "F" else ""
        self.assign(node, f"{m}.reshape({self.var[id(node.array)]}, "
                          f"{self.shape_source(node.shape)}{order})")

    def map_axis_permutation(self, node) -> None:
        m = self.module_for(node)
        perm = _tuple_source([str(i) for i in node.axis_permutation])
        self.assign(node, f"{m}.transpose({self.var[id(node.array)]}, {perm})")

    def map_roll(self, node) -> None:
        m = self.module_for(node)
        self.assign(node, f"{m}.roll({self.var[id(node.array)]}, {node.shift}, "
                          f"axis={node.axis})")

    def _joined(self, node, function: str) -> None:
        m = self.module_for(node)
        srcs = [self.var[id(a)] if a.dtype == node.dtype
                else _astype(m, self.var[id(a)], a.dtype, node.dtype, False)
                for a in node.arrays]
        self.assign(node, f"{m}.{function}([{', '.join(srcs)}], axis={node.axis})")

    def map_concatenate(self, node) -> None:
        self._joined(node, "concatenate")

    def map_stack(self, node) -> None:
        self._joined(node, "stack")

    def _index(self, node) -> None:
        keys = []
        for idx, dim in zip(node.indices, node.array.shape, strict=True):
            if isinstance(idx, NormalizedSlice):
                if idx.stop is None and idx.start == 0 and idx.step == 1:
                    keys.append(":")
                elif idx.stop is not None and idx.length == 0:
                    keys.append("0:0")
                else:
                    s = idx.to_slice()
                    start, stop, step = s.start, s.stop, s.step or 1
                    if step > 0:
                        # write x[1:] rather than x[1:4] for an axis of 4
                        start = None if start == 0 else start
                        stop = None if isinstance(dim, int) and stop == dim else stop
                    parts = ["" if start is None else str(start),
                             "" if stop is None else str(stop)]
                    if step != 1:
                        parts.append(str(step))
                    keys.append(":".join(parts))
            elif isinstance(idx, Array):
                keys.append(self.var[id(idx)])
            else:
                keys.append(repr(int(idx)))
        while keys and keys[-1] == ":":
            keys.pop()
        src = self.var[id(node.array)]
        self.assign(node, f"{src}[{', '.join(keys)}]" if keys else src)

    map_basic_index = _index
    map_contiguous_advanced_index = _index
    map_non_contiguous_advanced_index = _index

    # }}}

    # {{{ aliases and refusals

    def map_named_array(self, node) -> None:
        self.var[id(node)] = self.var[id(node.expr)]

    def map_to_device(self, node) -> None:
        # one Python function runs on one device: a transfer is the identity
        self.var[id(node)] = self.var[id(node.array)]

    def _distributed(self, node) -> None:
        raise UnsupportedArrayError(
            f"the Python targets cannot run a {type(node).__name__} of shape "
            f"{node.shape}, dtype {node.dtype}: partition the DAG with "
            "find_distributed_partition and execute it distributed")

    map_distributed_recv = _distributed
    map_distributed_send_ref_holder = _distributed

    # }}}

# }}}


def _host_nodes(order: list[Array]) -> set[int]:
    """Ids of the nodes that compute shape components (size expressions and
    what they read), found without recursion."""
    roots = [d for node in order for d in node.shape if isinstance(d, Array)]
    host: set[int] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in host:
            continue
        host.add(id(node))
        stack.extend(children_of(node))
    return host


def _check_argument_name(name: str, reserved: set[str]) -> None:
    if keyword.iskeyword(name):
        raise InvalidNameError(
            f"input name '{name}' is a Python keyword and cannot be a "
            "parameter of the generated Python function")
    if name in reserved:
        raise NameClashError(
            f"input name '{name}' is reserved by the generated Python code")


def generate_numpy_like(result: Array | DictOfNamedArrays | Mapping[str, Array],
                        target, function_name: str, *,
                        entrypoint_decorators: tuple[str, ...] = (),
                        extra_preambles: tuple[str, ...] = (),
                        show_code: bool = False,
                        colorize_show_code: bool | None = None):
    """Generate the Python source for *result* against *target*'s module
    and bind it (see the module documentation for how).

    :arg entrypoint_decorators: source of decorators of the generated
        function (without ``@``).
    :arg extra_preambles: extra source lines before the function (imports
        the decorators need).
    """
    from pytools import UniqueNameGenerator


    outputs, single = normalize_outputs(result)
    order = topological_order(list(outputs.values()))
    inputs = gather_program_inputs(order)

    module = target.numpy_like_module_name_shorthand
    reserved = {module, HOST_NUMPY, function_name, "_pt_partial",
                "_pt_jax_jit", "_MODULE_SOURCE_CODE"}
    name_gen = UniqueNameGenerator(forced_prefix="")
    for name in [*inputs.placeholders, *inputs.size_params,
                 *(dw.name for dw in inputs.data_wrappers if dw.name is not None)]:
        _check_argument_name(name, reserved)
        name_gen.add_name(name, conflicting_ok=True)
    name_gen.add_names(reserved)

    gen = _CodeGenerator(module, name_gen, _host_nodes(order))
    for node in order:
        gen(node)

    host = gen.host_nodes

    def output_source(ary: Array) -> str:
        var = gen.var[id(ary)]
        # host values (size expressions as outputs) become device arrays
        return f"{module}.asarray({var})" if id(ary) in host else var

    if single:
        gen.lines.append(f"return {output_source(outputs['_pt_out'])}")
    else:
        items = ", ".join(f"{name!r}: {output_source(outputs[name])}"
                          for name in sorted(outputs))
        gen.lines.append(f"return {{{items}}}")

    params = sorted(gen.arg_names)
    signature = f"*, {', '.join(params)}" if params else ""
    body = "\n".join(f"    {line}" for line in gen.lines)
    decorators = "".join(f"@{d}\n" for d in entrypoint_decorators)
    program = "\n".join([
        f"import {target.numpy_like_module_name} as {module}",
        f"import numpy as {HOST_NUMPY}",
        *extra_preambles,
        "",
        "",
        f"{decorators}def {function_name}({signature}):\n{body}",
        ""])
    logger.debug("generated %d lines of Python for %d nodes",
                 len(gen.lines), len(order))

    if show_code:
        _show_code(program, colorize_show_code)

    return target.bind_program(program, function_name,
                               expected_arguments=frozenset(gen.arg_names),
                               bound_arguments=gen.bound_arguments,
                               inputs=inputs)


def _show_code(program: str, colorize: bool | None) -> None:
    import os
    import sys
    if colorize is None:
        colorize = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    if colorize:
        try:
            from pygments import highlight
            from pygments.formatters import TerminalTrueColorFormatter
            from pygments.lexers import PythonLexer
        except ImportError:
            colorize = False
        else:
            print(highlight(program, PythonLexer(), TerminalTrueColorFormatter()))
            return
    print(program)
