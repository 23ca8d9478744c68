"""Values of array nodes at loopy indices.

:class:`NodeLowerer` answers one question: *what is the value of array
``node`` at index ``idx``*, as a loopy (pymbolic) expression over inames.
It knows two things only:

* **stored arrays** (inputs and arrays the cost model materialises) are
  read from memory (the ``stored_ref`` callback of code generation);
* every other array is an :class:`~pytato_like.array.IndexLambda`, either
  itself or as :func:`~pytato_like.transform.lower_to_index_lambda.to_index_lambda`
  lowers it (the one definition of what each node kind means), and is
  inlined by translating its scalar expression at ``idx``
  (:class:`~pytato_like.target.loopy.scalar_lowering.ScalarLowerer`, which
  reads the lambda's bindings through :meth:`NodeLowerer.value_at` again).

Scalar semantics (NumPy's where C differs) live in
:mod:`~pytato_like.target.loopy.scalar_lowering`; inlined narrow integers
are cast back to their dtype here so intermediate results wrap as in NumPy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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
    IndexLambda,
    NamedArray,
    Reshape,
    Roll,
    SizeParam,
    Stack,
)
from pytato_like.diagnostic import (
    CannotBeLoweredToIndexLambda,
    UnknownIndexLambdaExpr,
)
from pytato_like.target.loopy.scalar_lowering import (
    ScalarLowerer,
    cast_expr,
    uniquify_reduction_inames,
)
from pytato_like.transform.lower_to_index_lambda import to_index_lambda

if TYPE_CHECKING:
    from pymbolic.typing import Expression

    from pytato_like.array import ShapeComponent

__all__ = ["NodeLowerer", "ScalarLowerer", "cast_expr",
           "uniquify_reduction_inames"]

#: node kinds whose lambdas only move values: no arithmetic to wrap
_REARRANGING = (Reshape, AxisPermutation, Roll, BasicIndex, Concatenate, Stack,
                AdvancedIndexInContiguousAxes, AdvancedIndexInNoncontiguousAxes,
                NamedArray)


class NodeLowerer:
    """Lowers array values at given indices to loopy expressions.

    *stored_ref(node, idx)* returns the expression reading a stored array
    (or None when *node* is not stored); *dim_expr(d)* turns a shape
    component into an expression; new reduction inames and their bounds
    are appended to :attr:`reduction_inames`.
    """

    def __init__(self, stored_ref: Callable[[Array, tuple], Expression | None],
                 dim_expr: Callable[[ShapeComponent], Expression],
                 iname_prefix: str = "_pt_r") -> None:
        self.stored_ref = stored_ref
        self.dim_expr = dim_expr
        self.iname_prefix = iname_prefix
        #: (iname, lower bound, upper bound) of every reduction iname made
        self.reduction_inames: list[tuple[str, Expression, Expression]] = []
        #: names of the helper functions used (see :mod:`.functions`)
        self.helpers_used: set[str] = set()
        self._memo: dict[tuple[int, tuple], Expression] = {}
        #: id(node) -> its index lambda (each node is lowered once)
        self._lambdas: dict[int, IndexLambda] = {}

    def new_iname(self, lo, hi) -> prim.Variable:
        name = f"{self.iname_prefix}{len(self.reduction_inames)}"
        self.reduction_inames.append((name, lo, hi))
        return prim.Variable(name)

    def index_lambda(self, node: Array) -> IndexLambda:
        """*node* as an index lambda (lowered once per node)."""
        lam = self._lambdas.get(id(node))
        if lam is None:
            try:
                lam = to_index_lambda(node)
            except CannotBeLoweredToIndexLambda as exc:
                raise UnknownIndexLambdaExpr(
                    f"the loopy target cannot lower a {type(node).__name__} "
                    f"of shape {node.shape}: {exc}") from exc
            self._lambdas[id(node)] = lam
        return lam

    def value_at(self, node: Array, idx: tuple) -> Expression:
        ref = self.stored_ref(node, idx)
        if ref is not None:
            return ref
        if isinstance(node, SizeParam):
            return prim.Variable(node.name)
        key = (id(node), idx)
        try:
            return self._memo[key]
        except (KeyError, TypeError):
            pass
        n_inames = len(self.reduction_inames)
        lam = self.index_lambda(node)
        value, _ = ScalarLowerer(self, lam, idx).rec(lam.expr)
        if (node.dtype.kind in "iu" and node.dtype.itemsize < 4
                and not isinstance(node, _REARRANGING)):
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

    def cast(self, value, from_dtype: np.dtype, to_dtype: np.dtype):
        if from_dtype == to_dtype:
            return value
        return cast_expr(value, from_dtype, to_dtype)
