"""The loopy target whose OpenCL C keeps NumPy's order of operations.

NumPy evaluates ``a + (b + c)`` as written: ``b + c`` first. Loopy's C
printer writes a sum nested in a sum (and a product nested in a product)
without parentheses, as ``a + b + c``, which C groups from the left --
``(a + b) + c``: another rounding, so floating-point results differed
from NumPy's in the last bits (a 2-d stencil chain ``y[1:-1, 1:-1] +
y[2:, 2:]``: 631 of 1 496 elements one ulp off). :class:`OrderedPyOpenCLTarget`
is loopy's PyOpenCL target with a printer that parenthesizes every sum
(product) that is a later operand of a sum (product); the first operand
needs none, as C groups from the left. Together with
``#pragma OPENCL FP_CONTRACT OFF`` (no fused multiply-add, see
:func:`~pytato_like.opencl_build.build_program`) each ``+ - * /``
of the program rounds as NumPy's does.

.. autoclass:: OrderedPyOpenCLTarget
"""

from __future__ import annotations

import loopy as lp
import pymbolic.primitives as prim
from loopy.target.c.codegen.expression import CExpressionToCodeMapper
from loopy.target.pyopencl import PyOpenCLCASTBuilder
from pymbolic.mapper.stringifier import PREC_PRODUCT, PREC_SUM


class _OrderedCodeMapper(CExpressionToCodeMapper):
    """Loopy's C printer, with the grouping of nested sums and products
    kept."""

    def _join_grouped(self, joiner: str, children: tuple, prec: int,
                      grouped: tuple, always: tuple = ()) -> str:
        """*children* joined by *joiner*; a later child of a type in
        *grouped* (any child of a type in *always*) in parentheses."""
        parts = []
        for k, child in enumerate(children):
            text = self.rec(child, prec)
            if isinstance(child, always) or (k and isinstance(child, grouped)):
                text = f"({text})"
            parts.append(text)
        return joiner.join(parts)

    def map_sum(self, expr: prim.Sum, enclosing_prec: int) -> str:
        return self.parenthesize_if_needed(
            self._join_grouped(" + ", expr.children, PREC_SUM, (prim.Sum,)),
            enclosing_prec, PREC_SUM)

    def map_product(self, expr: prim.Product, enclosing_prec: int) -> str:
        # (quotients, floor divisions and remainders are parenthesized
        # anywhere, as loopy does)
        divisions = (prim.Quotient, prim.FloorDiv, prim.Remainder)
        # spaces keep '**z' (times dereference z) out of the code
        return self.parenthesize_if_needed(
            self._join_grouped(" * ", expr.children, PREC_PRODUCT,
                               (prim.Product,), always=divisions),
            enclosing_prec, PREC_PRODUCT)


class _OrderedCASTBuilder(PyOpenCLCASTBuilder):
    def get_c_expression_to_code_mapper(self) -> _OrderedCodeMapper:
        return _OrderedCodeMapper()


class OrderedPyOpenCLTarget(lp.PyOpenCLTarget):
    """:class:`loopy.PyOpenCLTarget` printing nested sums and products
    with the grouping they have (see the module)."""

    def get_device_ast_builder(self) -> _OrderedCASTBuilder:
        return _OrderedCASTBuilder(self)
