"""Lowering one array node to an equivalent
:class:`~pytato_like.array.IndexLambda`.

Every node that computes something from its operands can be written as a
scalar expression of its output indices. The lowered lambda reads the same
operands (bound as ``_in0``, ``_in1``, ...; size parameters in symbolic
extents get their own bindings), has the node's shape, dtype, axes and tags,
and evaluates to the same values:

==============================  ==========================================
node                            value at output index ``(_0, _1, ...)``
==============================  ==========================================
Einsum                          sum over ``_r0, ...`` of the product of the
                                operands (broadcast axes read index 0),
                                each cast to the result dtype
Reshape                         the operand at the index with the same
                                position in C (or F) order; a reshape
                                that only inserts or removes unit axes
                                reads the remaining axes directly
AxisPermutation                 the operand at the permuted index
Roll                            ``i - shift`` wrapped along the axis: a
                                comparison for a static extent (cheaper
                                than a modulo in inner loops), ``mod n``
                                for a symbolic one
BasicIndex                      ``start + step * i`` per slice, the integer
                                per integer index
AdvancedIndexIn...Axes          the index arrays read at the broadcast
                                index axes (negative entries wrap, as in
                                NumPy; out-of-range ones are clamped)
Concatenate                     an ``If`` chain on the position along the
                                axis, the operand shifted by its offset
                                (a balanced tree of them beyond
                                :data:`SELECT_CHAIN_MAX` operands, where
                                runs of look-alike pieces are each one
                                expression of the piece number:
                                :mod:`~pytato_like.transform.piece_runs`)
Stack                           an ``If`` chain on the stacking index
                                (the same)
NamedArray, ToDevice            the array it names or moves
==============================  ==========================================

Other node kinds (defined outside the package) declare their rule as a
method ``to_index_lambda(self) -> IndexLambda`` on their class; code
generation and the cost model then handle them like the built-in ones.

Every compiled target reads the meaning of a node from here: this module
is the one definition of what each computed node kind means.

Inputs (placeholders, data wrappers, size parameters), receives and
send-reference holders have no expression to lower and raise
:class:`~pytato_like.diagnostic.CannotBeLoweredToIndexLambda`.

As mappers (pytato's names): :class:`ToIndexLambdaMixin` gives a mapper
``map_*`` methods that lower each node and map the lowered node's
bindings with ``self.rec`` (mix it into a
:class:`~pytato_like.transform.CopyMapper` to lower a whole DAG, as
:class:`~pytato_like.codegen.CodeGenPreprocessor` does);
:class:`ToIndexLambdaMapper` lowers only the node it is called on. Both use
the lowering rules of this module (one rule per node class).

.. autofunction:: to_index_lambda
.. autodata:: SELECT_CHAIN_MAX
.. autoclass:: ToIndexLambdaMixin
.. autoclass:: ToIndexLambdaMapper
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

if sys.version_info >= (3, 11):
    from typing import Never
else:  # requires-python is 3.10
    from typing_extensions import Never

import numpy as np
import pymbolic.primitives as prim
from pytools import UniqueNameGenerator

from pytato_like.array import (
    Array,
    EinsumElementwiseAxis,
    IndexLambda,
    NormalizedSlice,
)
from pytato_like.diagnostic import CannotBeLoweredToIndexLambda
from pytato_like.reductions import AnyReductionOperation, SumReductionOperation
from pytato_like.scalar_expr import (
    TypeCast,
    index_var,
    index_vars,
    make_reduce,
    reduction_var,
)
from pytato_like.transform.copy import rebuild_with
from pytato_like.transform.mapper import Mapper
from pytato_like.transform.piece_runs import piece_runs, run_value
from pytato_like.utils import (
    dim_to_index_lambda_components,
    get_shape_after_broadcasting,
    is_one,
)

if TYPE_CHECKING:
    from pymbolic.typing import ArithmeticExpression

    from pytato_like.array import ShapeComponent
    from pytato_like.transform.mapper import ArrayOrNames

# {{{ index arithmetic that stays readable for static extents


def _add(a: ArithmeticExpression, b: ArithmeticExpression) -> ArithmeticExpression:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(b, int) and b == 0:
        return a
    if isinstance(a, int) and a == 0:
        return b
    return prim.Sum((a, b))


def _mul(a: ArithmeticExpression, b: ArithmeticExpression) -> ArithmeticExpression:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    if isinstance(a, int) and a == 1:
        return b
    if isinstance(b, int) and b == 1:
        return a
    if (isinstance(a, int) and a == 0) or (isinstance(b, int) and b == 0):
        return 0
    return prim.Product((a, b))


def _neg(a: ArithmeticExpression) -> ArithmeticExpression:
    return -a if isinstance(a, int) else prim.Product((-1, a))


def _floordiv(a: ArithmeticExpression, b: ArithmeticExpression) -> ArithmeticExpression:
    if isinstance(b, int) and b == 1:
        return a
    return prim.FloorDiv(a, b)


def _mod(a: ArithmeticExpression, b: ArithmeticExpression) -> ArithmeticExpression:
    return prim.Remainder(a, b)

# }}}


class _LambdaBuilder:
    """Collects the bindings of one lambda: arrays (each once) as
    ``_in<k>``, size parameters of symbolic extents under fresh names."""

    def __init__(self) -> None:
        self.bindings: dict[str, Array] = {}
        self._name_of: dict[int, str] = {}
        self._vng = UniqueNameGenerator()

    def name_of(self, ary: Array) -> str:
        """The name *ary* is bound under (bound now if it was not)."""
        name = self._name_of.get(id(ary))
        if name is None:
            name = self._vng(f"_in{len(self.bindings)}")
            self._name_of[id(ary)] = name
            self.bindings[name] = ary
        return name

    def read(self, ary: Array, index: list | tuple, dtype=None) -> ArithmeticExpression:
        name = self.name_of(ary)
        access: prim.ExpressionNode = (
            prim.Subscript(prim.Variable(name), tuple(index))
            if ary.ndim else prim.Variable(name))
        if dtype is not None and ary.dtype != dtype:
            access = TypeCast(dtype, access)
        return access

    def dim(self, d: ShapeComponent) -> ArithmeticExpression:
        """A scalar expression for the extent *d* (int or size expression)."""
        if not isinstance(d, Array):
            return int(d)
        expr, bindings = dim_to_index_lambda_components(d, self._vng)
        self.bindings.update(bindings)
        return expr

    def build(self, node: Array, expr: ArithmeticExpression, var_to_reduction_descr=None
              ) -> IndexLambda:
        return IndexLambda(expr, node.shape, node.dtype, self.bindings,
                           var_to_reduction_descr, axes=node.axes,
                           tags=node.tags)


# {{{ one function per node class

def _lower_einsum(expr) -> IndexLambda:
    b = _LambdaBuilder()
    extents = expr._get_reduction_extents()
    factors = []
    for acc, arg in zip(expr.access_descriptors, expr.args, strict=True):
        index = []
        for descr, dim in zip(acc, arg.shape, strict=True):
            if isinstance(descr, EinsumElementwiseAxis):
                full, var = expr.shape[descr.dim], index_var(descr.dim)
            else:
                full, var = extents[descr], reduction_var(descr.dim)
            # a unit axis against a longer one broadcasts, as in NumPy
            index.append(0 if is_one(dim) and not is_one(full) else var)
        factors.append(b.read(arg, index, expr.dtype))
    body = factors[0] if len(factors) == 1 else prim.Product(tuple(factors))
    if not extents:
        return b.build(expr, body)
    op = AnyReductionOperation if expr.dtype.kind == "b" else SumReductionOperation
    if op is AnyReductionOperation and len(factors) > 1:
        body = prim.LogicalAnd(tuple(factors))
    descrs = sorted(extents, key=lambda d: d.dim)
    bounds = {reduction_var(d.dim).name: (0, b.dim(extents[d])) for d in descrs}
    var_to_descr = {reduction_var(d.dim).name: expr.redn_axis_to_redn_descr[d]
                    for d in descrs}
    return b.build(expr, make_reduce(body, op, bounds), var_to_descr)


def _flat_index(shape_exprs: list, vars_: list, order: str) -> ArithmeticExpression:
    """Position of the index *vars_* in an array of extents *shape_exprs*
    laid out in *order*."""
    axes: Iterable[int] = range(len(shape_exprs))
    if order == "F":
        axes = reversed(range(len(shape_exprs)))
    flat: ArithmeticExpression = 0
    for i in axes:
        flat = _add(_mul(flat, shape_exprs[i]), vars_[i])
    return flat


def _only_unit_axes_moved(old_shape: tuple, new_shape: tuple
                          ) -> list[tuple[int, int]] | None:
    """``(old axis, new axis)`` pairs of the non-unit axes when a reshape
    only inserts or removes unit axes, else None."""
    old_non1 = [i for i, d in enumerate(old_shape) if not is_one(d)]
    new_non1 = [i for i, d in enumerate(new_shape) if not is_one(d)]
    if len(old_non1) != len(new_non1):
        return None
    pairs = list(zip(old_non1, new_non1, strict=True))
    for i, j in pairs:
        a, b = old_shape[i], new_shape[j]
        if isinstance(a, int) != isinstance(b, int) or a != b:
            return None
    return pairs


def _lower_reshape(expr) -> IndexLambda:
    b = _LambdaBuilder()
    ary = expr.array
    pairs = _only_unit_axes_moved(ary.shape, expr.shape)
    if pairs is not None:
        # the fast form: each remaining axis read directly, no division
        direct: list[ArithmeticExpression] = [0] * ary.ndim
        for i, j in pairs:
            direct[i] = index_var(j)
        return b.build(expr, b.read(ary, direct))
    out_dims = [b.dim(d) for d in expr.shape]
    out_vars = [0 if is_one(d) else index_var(i) for i, d in enumerate(expr.shape)]
    flat = _flat_index(out_dims, out_vars, expr.order)
    in_dims = [b.dim(d) for d in ary.shape]
    n = len(in_dims)
    axes = list(range(n)) if expr.order == "C" else list(range(n))[::-1]
    # axes[0] varies slowest; stride of axes[k] = product of later extents
    index: list[ArithmeticExpression] = [0] * n
    stride: ArithmeticExpression = 1
    for k in reversed(range(n)):
        ax = axes[k]
        if is_one(ary.shape[ax]):
            index[ax] = 0
        else:
            pos = _floordiv(flat, stride)
            index[ax] = pos if k == 0 else _mod(pos, in_dims[ax])
        stride = _mul(stride, in_dims[ax])
    return b.build(expr, b.read(ary, index))


def _lower_axis_permutation(expr) -> IndexLambda:
    b = _LambdaBuilder()
    index: list[ArithmeticExpression | None] = [None] * expr.ndim
    for out_axis, in_axis in enumerate(expr.axis_permutation):
        index[in_axis] = index_var(out_axis)
    return b.build(expr, b.read(expr.array, index))


#: (ndim, axis, extent, shift) -> the expression of a roll over a static
#: extent: a stencil rolls the same few ways thousands of times
_ROLL_EXPRESSIONS: dict[tuple[int, int, int, int], ArithmeticExpression] = {}


def _lower_roll(expr) -> IndexLambda:
    dim = expr.array.shape[expr.axis]
    if type(dim) is int:
        key = (expr.ndim, expr.axis, dim, expr.shift)
        body = _ROLL_EXPRESSIONS.get(key)
        if body is None:
            if len(_ROLL_EXPRESSIONS) > 10_000:  # bounded, like the front end's memo
                _ROLL_EXPRESSIONS.clear()
            body = _ROLL_EXPRESSIONS[key] = _lower_roll_uncached(expr).expr
        # (the one binding is named as _LambdaBuilder names a first array)
        return IndexLambda(body, expr.shape, expr.dtype, {"_in0": expr.array},
                           None, axes=expr.axes, tags=expr.tags)
    return _lower_roll_uncached(expr)


def _lower_roll_uncached(expr) -> IndexLambda:
    b = _LambdaBuilder()
    index: list[ArithmeticExpression] = list(index_vars(expr.ndim))
    dim = expr.array.shape[expr.axis]
    var = index_var(expr.axis)
    if isinstance(dim, Array):
        n = b.dim(dim)
        # (i - shift) mod n, kept non-negative for C-style remainders too
        index[expr.axis] = _mod(_add(_add(var, n), _neg(_mod(expr.shift, n))), n)
    elif dim > 0 and expr.shift % dim:
        shift = expr.shift % dim
        # a comparison instead of a modulo: cheaper in inner loops
        index[expr.axis] = prim.If(prim.Comparison(var, "<", shift),
                                   _add(var, dim - shift), _add(var, -shift))
    return b.build(expr, b.read(expr.array, index))


def _lower_basic_index(expr) -> IndexLambda:
    b = _LambdaBuilder()
    index: list[ArithmeticExpression] = []
    out_axis = 0
    for idx in expr.indices:
        if isinstance(idx, NormalizedSlice):
            index.append(_add(idx.start, _mul(idx.step, index_var(out_axis))))
            out_axis += 1
        else:
            index.append(idx)
    return b.build(expr, b.read(expr.array, index))


def _lower_advanced_index(expr) -> IndexLambda:
    b = _LambdaBuilder()
    indices = expr.indices
    ary = expr.array
    adv_shape = get_shape_after_broadcasting(
        [i for i in indices if isinstance(i, Array)])
    n_adv = len(adv_shape)
    contiguous = expr._mapper_method == "map_contiguous_advanced_index"
    first_adv = next(i for i, idx in enumerate(indices)
                     if not isinstance(idx, NormalizedSlice))
    adv_start = first_adv if contiguous else 0
    slice_axis = 0 if contiguous else n_adv  # next output axis of a slice
    index: list[ArithmeticExpression] = []
    for pos, (idx, dim) in enumerate(zip(indices, ary.shape, strict=True)):
        if isinstance(idx, NormalizedSlice):
            if contiguous and pos > first_adv and slice_axis < adv_start + n_adv:
                slice_axis = adv_start + n_adv
            index.append(_add(idx.start, _mul(idx.step, index_var(slice_axis))))
            slice_axis += 1
        elif isinstance(idx, Array):
            offset = adv_start + n_adv - idx.ndim
            sub = [0 if is_one(d) and not is_one(adv_shape[n_adv - idx.ndim + k])
                   else index_var(offset + k) for k, d in enumerate(idx.shape)]
            value = b.read(idx, sub)
            n = b.dim(dim)
            if idx.dtype == np.uint64 and isinstance(n, int):
                # a uint64 beside a signed bound promotes to float: clamp
                # with uint64 bounds (cannot be negative)
                index.append(prim.If(prim.Comparison(value, ">=", n),
                                     np.uint64(n - 1), value))
                continue
            if idx.dtype.kind == "i":
                # negative entries count from the end, as in NumPy
                value = prim.If(prim.Comparison(value, "<", 0),
                                _add(value, n), value)
            # out-of-range entries are clamped: never read outside the
            # array (NumPy raises; the loopy target's run-time checks do)
            index.append(prim.If(prim.Comparison(value, "<", 0), 0,
                                 prim.If(prim.Comparison(value, ">=", n),
                                         _add(n, -1), value)))
        else:
            index.append(idx)
    return b.build(expr, b.read(ary, index))


def _lower_concatenate(expr) -> IndexLambda:
    b = _LambdaBuilder()
    axis = expr.axis
    var = index_var(axis)
    offsets: list[ArithmeticExpression] = []
    offset: ArithmeticExpression = 0
    for ary in expr.arrays:
        offsets.append(offset)
        offset = _add(offset, b.dim(ary.shape[axis]))

    def piece(k: int) -> ArithmeticExpression:
        index: list[ArithmeticExpression] = list(index_vars(expr.ndim))
        index[axis] = _add(var, _neg(offsets[k]))
        return b.read(expr.arrays[k], index, expr.dtype)

    if len(expr.arrays) <= SELECT_CHAIN_MAX or not all(
            isinstance(o, int) for o in offsets):
        pieces = [piece(k) for k in range(len(expr.arrays))]
        return b.build(expr, _select_by_position(var, offsets, pieces))
    # many pieces: runs of look-alike ones are read as one expression of
    # the piece number (its size does not grow with the run)
    starts: list[ArithmeticExpression] = []
    values: list[ArithmeticExpression] = []
    for run in piece_runs(expr.arrays, to_index_lambda):
        starts.append(offsets[run.first])
        if run.template is None:
            values.append(piece(run.first))
            continue
        width = expr.arrays[run.first].shape[axis]
        relative = _add(var, -offsets[run.first])
        value = run_value(run, _floordiv(relative, width),
                          {var.name: _mod(relative, width) if width != 1 else 0},
                          b.name_of)
        if run.template.key[1] != expr.dtype:
            value = TypeCast(expr.dtype, value)
        values.append(value)
    return b.build(expr, _select_by_position(var, starts, values))


def _lower_stack(expr) -> IndexLambda:
    b = _LambdaBuilder()
    axis = expr.axis
    out_vars = index_vars(expr.ndim)
    index = [*out_vars[:axis], *out_vars[axis + 1:]]
    if len(expr.arrays) <= SELECT_CHAIN_MAX:
        pieces = [b.read(ary, index, expr.dtype) for ary in expr.arrays]
        result = pieces[-1]
        for k in reversed(range(len(pieces) - 1)):
            result = prim.If(prim.Comparison(out_vars[axis], "==", k),
                             pieces[k], result)
        return b.build(expr, result)
    # many arrays: runs of look-alike ones read as one (see the above)
    starts: list[ArithmeticExpression] = []
    values: list[ArithmeticExpression] = []
    # a stacked array's axis d is the stack's axis d (or d + 1 past *axis*)
    own_index = {index_var(d).name: index[d] for d in range(expr.ndim - 1)}
    for run in piece_runs(expr.arrays, to_index_lambda):
        starts.append(run.first)
        if run.template is None:
            values.append(b.read(expr.arrays[run.first], index, expr.dtype))
            continue
        value = run_value(run, _add(out_vars[axis], -run.first), own_index,
                          b.name_of)
        if run.template.key[1] != expr.dtype:
            value = TypeCast(expr.dtype, value)
        values.append(value)
    return b.build(expr, _select_by_position(out_vars[axis], starts, values))


#: most pieces of a concatenation or stack selected by a chain of
#: conditions (``i < o1 ? p0 : (i < o2 ? p1 : ...)``); more are selected
#: by a balanced tree of them, whose depth grows as the logarithm of the
#: number of pieces: a chain of 5 000 is too deep for the recursive
#: hashing and walks of pymbolic and loopy
SELECT_CHAIN_MAX = 8


def _select_by_position(var: ArithmeticExpression,
                        starts: list[ArithmeticExpression],
                        pieces: list[ArithmeticExpression]
                        ) -> ArithmeticExpression:
    """The piece ``k`` of *pieces* where ``starts[k] <= var <
    starts[k + 1]`` (*starts* increasing, ``starts[0]`` the lowest
    position): a chain of selects for a few pieces, a balanced tree of
    them for more (built level by level, without recursion)."""
    if len(pieces) <= SELECT_CHAIN_MAX:
        result = pieces[-1]
        for k in reversed(range(len(pieces) - 1)):
            result = prim.If(prim.Comparison(var, "<", starts[k + 1]),
                             pieces[k], result)
        return result
    # (first piece index, expression) of each subtree, merged in pairs
    level: list[tuple[int, ArithmeticExpression]] = list(enumerate(pieces))
    while len(level) > 1:
        merged: list[tuple[int, ArithmeticExpression]] = []
        for j in range(0, len(level) - 1, 2):
            (first, left), (middle, right) = level[j], level[j + 1]
            merged.append((first, prim.If(
                prim.Comparison(var, "<", starts[middle]), left, right)))
        if len(level) % 2:
            merged.append(level[-1])
        level = merged
    return level[0][1]


def _lower_named_array(expr) -> IndexLambda:
    b = _LambdaBuilder()
    return b.build(expr, b.read(expr.expr, index_vars(expr.ndim)))


def _lower_identity(expr) -> IndexLambda:
    # a device transfer within one program is the identity; moving data
    # between devices happens between parts (runtime.placement)
    b = _LambdaBuilder()
    return b.build(expr, b.read(expr.array, index_vars(expr.ndim)))


_LOWERINGS = {
    "map_einsum": _lower_einsum,
    "map_reshape": _lower_reshape,
    "map_axis_permutation": _lower_axis_permutation,
    "map_roll": _lower_roll,
    "map_basic_index": _lower_basic_index,
    "map_contiguous_advanced_index": _lower_advanced_index,
    "map_non_contiguous_advanced_index": _lower_advanced_index,
    "map_concatenate": _lower_concatenate,
    "map_stack": _lower_stack,
    "map_named_array": _lower_named_array,
    "map_to_device": _lower_identity,
}

# }}}


#: where :func:`to_index_lambda` keeps a node's lowering (in the node's
#: instance dictionary: not a field, so not hashed, compared or pickled)
_LOWERED = "_pt_lowered_index_lambda"


def to_index_lambda(expr: ArrayOrNames) -> IndexLambda:
    """*expr* as an :class:`~pytato_like.array.IndexLambda` computing the
    same values (the node itself if it is one); raises
    :class:`~pytato_like.diagnostic.CannotBeLoweredToIndexLambda` for nodes
    without an expression (inputs, receives, send-reference holders)."""
    if isinstance(expr, IndexLambda):
        return expr
    lower = _LOWERINGS.get(getattr(expr, "_mapper_method", ""))
    if lower is not None:
        # Nodes are immutable and lowering is a pure function of the node,
        # so the result is kept with it: one compile lowers each node
        # several times (the storage decision, then code generation)
        state = expr.__dict__
        lam = state.get(_LOWERED)
        if lam is None:
            lam = state[_LOWERED] = lower(expr)
        return lam
    if lower is None:
        # a node kind defined outside the package declares its own rule
        lower = getattr(type(expr), "to_index_lambda", None)
    if lower is None:
        what = (f"{type(expr).__name__} of shape {expr.shape}, dtype "
                f"{expr.dtype}" if isinstance(expr, Array)
                else f"object of type {type(expr).__name__}")
        raise CannotBeLoweredToIndexLambda(
            f"a {what} cannot be lowered to an IndexLambda")
    return lower(expr)


# {{{ mappers

class _MapsChildren(Protocol):
    def rec(self, expr: ArrayOrNames) -> ArrayOrNames: ...


def _lower_then_rec(self: _MapsChildren, expr: ArrayOrNames) -> Array:
    return rebuild_with(to_index_lambda(expr), self.rec)


class ToIndexLambdaMixin:
    """``map_*`` methods for every node class with an expression: the node
    lowered by :func:`to_index_lambda`, with its bindings (and size
    expressions in its shape) replaced by ``self.rec`` of them. An
    :class:`~pytato_like.array.IndexLambda` keeps its expression and gets
    its bindings mapped the same way. Mix into a mapper class before the
    base that provides :meth:`rec` and the remaining methods."""

    map_index_lambda = _lower_then_rec

    def handle_unsupported_array(self, expr: ArrayOrNames, *args: object,
                                 **kwargs: object) -> ArrayOrNames:

        # node kinds from outside the package that declare their rule
        if callable(getattr(type(expr), "to_index_lambda", None)):
            # (rec: from the mapper base this is mixed into)
            return _lower_then_rec(cast("_MapsChildren", self), expr)
        return super().handle_unsupported_array(  # type: ignore[misc]
            expr, *args, **kwargs)


for _name in _LOWERINGS:
    setattr(ToIndexLambdaMixin, _name, _lower_then_rec)
del _name


class ToIndexLambdaMapper(Mapper[Array, Never, []], ToIndexLambdaMixin):
    """Calling it on a node returns the node lowered to an
    :class:`~pytato_like.array.IndexLambda` (its bindings are the original
    operands, not lowered further); inputs raise
    :class:`~pytato_like.diagnostic.CannotBeLoweredToIndexLambda`."""

    def handle_unsupported_array(self, expr: ArrayOrNames, *args: object,
                                 **kwargs: object) -> Array:
        return to_index_lambda(expr)  # raises, naming the node

    def rec(self, expr: ArrayOrNames, *args: object, **kwargs: object
            ) -> Any:
        # one level only: the operands stay as they are (Any: this is the
        # identity, while the base class promises an Array)
        return expr

    def __call__(self, expr: ArrayOrNames, *args: object, **kwargs: object
                 ) -> Array:
        return Mapper.rec(self, expr)


# }}}
