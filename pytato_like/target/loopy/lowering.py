"""Lowering of array nodes and scalar expressions to loopy expressions.

:class:`NodeLowerer` answers one question: *what is the value of array
``node`` at index ``idx``*, as a loopy (pymbolic) expression over inames.
Stored arrays (inputs and arrays the cost model materialises) are read from
memory; every other array is inlined by lowering its definition at the
requested index:

=============================  ===========================================
node                           value at ``idx``
=============================  ===========================================
IndexLambda                    its scalar expression, index variables
                               replaced by ``idx``, reductions turned into
                               :class:`loopy.Reduction` over fresh inames
Einsum                         ``sum`` over fresh inames of the product of
                               the operands (broadcast axes read index 0)
Reshape                        operand at the index with the same linear
                               position (C or F order); unit-axis
                               insertions and removals map directly
AxisPermutation                operand at the permuted index
Roll                           operand at ``idx - shift`` wrapped around
BasicIndex / advanced index    operand at ``start + step * i``, constants,
                               and values of the index arrays (negative
                               entries wrap, out-of-range ones are clamped)
Concatenate / Stack            ``If`` chain over the pieces
=============================  ===========================================

Scalar semantics follow NumPy where C differs: integer ``//`` and ``%``
floor and give 0 for a zero divisor, float ``//`` and ``%`` use NumPy's
algorithm, integer ``**`` is exact, ``max``/``min`` reductions propagate
NaN, booleans are 0/1 bytes, and inlined narrow integers are cast back to
their dtype so intermediate results wrap as in NumPy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import loopy as lp
import numpy as np
import pymbolic.primitives as prim

from pytato_like.array import (
    AdvancedIndexInContiguousAxes,
    AdvancedIndexInNoncontiguousAxes,
    Array,
    AxisPermutation,
    BasicIndex,
    Concatenate,
    Einsum,
    EinsumElementwiseAxis,
    IndexLambda,
    NamedArray,
    NormalizedSlice,
    Reshape,
    Roll,
    SizeParam,
    Stack,
)
from pytato_like.diagnostic import UnknownIndexLambdaExpr
from pytato_like.target.loopy.scalar_lowering import (
    ScalarLowerer,
    _add,
    _is_one,
    _is_zero,
    _mul,
    _same_dim,
    cast_expr,
    uniquify_reduction_inames,
)

__all__ = ["NodeLowerer", "ScalarLowerer", "cast_expr",
           "uniquify_reduction_inames"]


class NodeLowerer:
    """Lowers array values at given indices to loopy expressions.

    *stored_ref(node, idx)* returns the expression reading a stored array
    (or None when *node* is not stored); *dim_expr(d)* turns a shape
    component into an expression; new reduction inames and their bounds
    are appended to :attr:`reduction_inames`.
    """

    def __init__(self, stored_ref: Callable[[Array, tuple], Any],
                 dim_expr: Callable[[Any], Any],
                 iname_prefix: str = "_pt_r") -> None:
        self.stored_ref = stored_ref
        self.dim_expr = dim_expr
        self.iname_prefix = iname_prefix
        #: (iname, lower bound, upper bound) of every reduction iname made
        self.reduction_inames: list[tuple[str, Any, Any]] = []
        #: names of the helper functions used (see :mod:`.functions`)
        self.helpers_used: set[str] = set()
        self._memo: dict[tuple[int, tuple], Any] = {}

    def new_iname(self, lo, hi) -> prim.Variable:
        name = f"{self.iname_prefix}{len(self.reduction_inames)}"
        self.reduction_inames.append((name, lo, hi))
        return prim.Variable(name)

    # {{{ array values

    def value_at(self, node: Array, idx: tuple) -> Any:
        ref = self.stored_ref(node, idx)
        if ref is not None:
            return ref
        key = (id(node), idx)
        try:
            return self._memo[key]
        except (KeyError, TypeError):
            pass
        n_inames = len(self.reduction_inames)
        value = getattr(self, "lower_" + node._mapper_method[4:])(node, idx)
        if (node.dtype.kind in "iu" and node.dtype.itemsize < 4
                and isinstance(node, (IndexLambda, Einsum))):
            # C computes in int: cast back so the result wraps as in NumPy.
            # Through int32, because loopy drops a cast to the type it
            # infers (its types do not promote: ~uchar is uchar to loopy)
            value = lp.TypeCast(node.dtype,
                                lp.TypeCast(np.dtype(np.int32), value))
        if len(self.reduction_inames) == n_inames:
            # values containing reductions are not reused: loopy needs
            # fresh inames for every occurrence of a reduction
            try:
                self._memo[key] = value
            except TypeError:
                pass
        return value

    def lower_size_param(self, node: SizeParam, idx):
        return prim.Variable(node.name)

    def lower_named_array(self, node: NamedArray, idx):
        return self.value_at(node.expr, idx)

    def lower_index_lambda(self, node: IndexLambda, idx):
        expr, _ = ScalarLowerer(self, node, idx).rec(node.expr)
        return expr

    def lower_einsum(self, node: Einsum, idx):
        extents = node._get_reduction_extents()
        red_vars = {descr: self.new_iname(0, self.dim_expr(ext))
                    for descr, ext in sorted(extents.items(),
                                             key=lambda kv: kv[0].dim)}
        factors = []
        for acc, arg in zip(node.access_descriptors, node.args, strict=True):
            index = []
            for descr, dim in zip(acc, arg.shape, strict=True):
                if isinstance(descr, EinsumElementwiseAxis):
                    broadcast = _is_one(dim) and not _is_one(node.shape[descr.dim])
                    index.append(0 if broadcast else idx[descr.dim])
                else:
                    broadcast = _is_one(dim) and not _is_one(extents[descr])
                    index.append(0 if broadcast else red_vars[descr])
            value = self.value_at(arg, tuple(index))
            factors.append(self.cast(value, arg.dtype, node.dtype))
        product = factors[0] if len(factors) == 1 else prim.Product(tuple(factors))
        if not red_vars:
            return product
        return lp.Reduction("sum", tuple(v.name for v in red_vars.values()),
                            product)

    def lower_reshape(self, node: Reshape, idx):
        old_shape = node.array.shape
        new_shape = node.shape
        old_non1 = [i for i, d in enumerate(old_shape) if not _is_one(d)]
        new_non1 = [i for i, d in enumerate(new_shape) if not _is_one(d)]
        if (len(old_non1) == len(new_non1)
                and all(_same_dim(old_shape[i], new_shape[j])
                        for i, j in zip(old_non1, new_non1, strict=True))):
            # only unit axes inserted or removed
            index = [0] * len(old_shape)
            for i, j in zip(old_non1, new_non1, strict=True):
                index[i] = idx[j]
            return self.value_at(node.array, tuple(index))
        order = range(len(new_shape)) if node.order == "C" \
            else range(len(new_shape) - 1, -1, -1)
        linear = 0
        for i in order:
            linear = _add(_mul(linear, self.dim_expr(new_shape[i])), idx[i])
        old_order = list(range(len(old_shape)))
        if node.order == "C":
            old_order.reverse()  # last axis varies fastest
        index = [0] * len(old_shape)
        stride = 1
        for n, i in enumerate(old_order):
            dim = self.dim_expr(old_shape[i])
            q = linear if stride == 1 else prim.FloorDiv(linear, stride)
            index[i] = q if n == len(old_order) - 1 else prim.Remainder(q, dim)
            stride = _mul(stride, dim)
        return self.value_at(node.array, tuple(index))

    def lower_axis_permutation(self, node: AxisPermutation, idx):
        index = [None] * node.ndim
        for i, src in enumerate(node.axis_permutation):
            index[src] = idx[i]
        return self.value_at(node.array, tuple(index))

    def lower_roll(self, node: Roll, idx):
        dim = node.array.shape[node.axis]
        i = idx[node.axis]
        if isinstance(dim, int):
            shift = node.shift % dim if dim else 0
            if shift == 0:
                src = i
            else:
                # a comparison instead of a modulo: cheaper in inner loops
                src = prim.If(prim.Comparison(i, "<", shift),
                              _add(i, dim - shift), _add(i, -shift))
        else:
            src = prim.Remainder(_add(i, -node.shift), self.dim_expr(dim))
        index = (*idx[:node.axis], src, *idx[node.axis + 1:])
        return self.value_at(node.array, index)

    def _slice_index(self, s: NormalizedSlice, i):
        if s.stop is None:
            return i
        return _add(s.start, _mul(s.step, i))

    def lower_basic_index(self, node: BasicIndex, idx):
        index = []
        k = 0
        for s in node.indices:
            if isinstance(s, NormalizedSlice):
                index.append(self._slice_index(s, idx[k]))
                k += 1
            else:
                index.append(int(s))
        return self.value_at(node.array, tuple(index))

    def _advanced(self, node, idx, adv_first: int):
        from pytato_like.utils import get_shape_after_broadcasting
        arrays = [i for i in node.indices if isinstance(i, Array)]
        adv_shape = get_shape_after_broadcasting(arrays)
        n_adv = len(adv_shape)
        adv_idx = idx[adv_first:adv_first + n_adv]
        rest = list(idx[:adv_first]) + list(idx[adv_first + n_adv:])
        index = []
        k = 0
        for s, dim in zip(node.indices, node.array.shape, strict=True):
            if isinstance(s, NormalizedSlice):
                index.append(self._slice_index(s, rest[k]))
                k += 1
            elif isinstance(s, Array):
                off = n_adv - s.ndim
                sub = tuple(0 if _is_one(d) and not _is_one(adv_shape[off + j])
                            else adv_idx[off + j] for j, d in enumerate(s.shape))
                v = self.value_at(s, sub)
                if isinstance(v, lp.TypeCast):
                    # loopy's index analysis cannot see through casts
                    v = v.child
                d = self.dim_expr(dim)
                if s.dtype.kind == "i":
                    v = prim.If(prim.Comparison(v, "<", 0), _add(v, d), v)
                # clamp: never read outside the array
                v = prim.If(prim.Comparison(v, "<", 0), 0,
                            prim.If(prim.Comparison(v, ">=", d), _add(d, -1), v))
                index.append(v)
            else:
                index.append(int(s))
        return self.value_at(node.array, tuple(index))

    def lower_contiguous_advanced_index(self, node: AdvancedIndexInContiguousAxes,
                                        idx):
        first = next(i for i, s in enumerate(node.indices)
                     if not isinstance(s, NormalizedSlice))
        n_slices_before = sum(1 for s in node.indices[:first]
                              if isinstance(s, NormalizedSlice))
        return self._advanced(node, idx, n_slices_before)

    def lower_non_contiguous_advanced_index(
            self, node: AdvancedIndexInNoncontiguousAxes, idx):
        return self._advanced(node, idx, 0)

    def lower_concatenate(self, node: Concatenate, idx):
        ax = node.axis
        i = idx[ax]
        offsets = []
        off = 0
        for a in node.arrays:
            offsets.append(off)
            off = _add(off, self.dim_expr(a.shape[ax]))
        result = None
        for a, start in reversed(list(zip(node.arrays, offsets, strict=True))):
            index = (*idx[:ax], _add(i, prim.Product((-1, start)))
                     if not _is_zero(start) else i, *idx[ax + 1:])
            value = self.cast(self.value_at(a, index), a.dtype, node.dtype)
            if result is None:
                result = value
            else:
                end = _add(start, self.dim_expr(a.shape[ax]))
                result = prim.If(prim.Comparison(i, ">=", end), result, value)
        return result

    def lower_stack(self, node: Stack, idx):
        ax = node.axis
        i = idx[ax]
        rest = (*idx[:ax], *idx[ax + 1:])
        result = None
        for k in range(len(node.arrays) - 1, -1, -1):
            a = node.arrays[k]
            value = self.cast(self.value_at(a, rest), a.dtype, node.dtype)
            result = value if result is None else prim.If(
                prim.Comparison(i, "==", k), value, result)
        return result

    def lower_to_device(self, node, idx):
        # within one program a transfer is the identity; moving data between
        # devices happens between parts (runtime.placement)
        return self.value_at(node.array, idx)

    def handle_unsupported(self, node, idx):
        raise UnknownIndexLambdaExpr(
            f"the loopy target cannot lower a {type(node).__name__} of shape "
            f"{node.shape}")

    def __getattr__(self, name):
        if name.startswith("lower_"):
            return self.handle_unsupported
        raise AttributeError(name)

    # }}}

    def cast(self, value, from_dtype: np.dtype, to_dtype: np.dtype):
        if from_dtype == to_dtype:
            return value
        return cast_expr(value, from_dtype, to_dtype)
