"""Lowering of the scalar expressions inside index lambdas to loopy.

:class:`ScalarLowerer` translates one :class:`~pytato_like.array.IndexLambda`'s
scalar expression, at one index, into a loopy expression, with NumPy's
semantics where C's differ (see :mod:`pytato_like.target.loopy.lowering` for
the list); :func:`cast_expr` is NumPy's ``astype`` on the device. The array
side (which value each node has at an index) is
:class:`~pytato_like.target.loopy.lowering.NodeLowerer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import loopy as lp
import numpy as np
import pymbolic.primitives as prim

from pytato_like.array import Array, IndexLambda
from pytato_like.diagnostic import UnknownIndexLambdaExpr
from pytato_like.scalar_expr import C99_FUNCTION_PREFIX, Reduce, TypeCast
from pytato_like.target.loopy.functions import helper_symbol

if TYPE_CHECKING:
    from pymbolic.typing import Expression

    from pytato_like.target.loopy.lowering import NodeLowerer

#: a constant of a scalar expression
Constant = np.generic | int | float | complex

BOOL = np.dtype(np.bool_)

#: IR math function name -> loopy function name
_FUNCTION_NAMES = {
    "abs": "abs", "sqrt": "sqrt", "exp": "exp", "log": "log",
    "log10": "log10", "sin": "sin", "cos": "cos", "tan": "tan",
    "asin": "asin", "acos": "acos", "atan": "atan", "atan2": "atan2",
    "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "conj": "conj", "real": "real", "imag": "imag",
}


from pytato_like.target.loopy.plan import storage_dtype  # noqa: E402
from pytato_like.target.loopy.functions import COMPLEX_VALUES  # noqa: E402


def _real_dtype(dtype: np.dtype) -> np.dtype:
    return np.empty(0, dtype).real.dtype


def _const(value: Constant) -> Constant:
    """A constant as loopy wants it (booleans as int8)."""
    if isinstance(value, (bool, np.bool_)):
        return np.int8(bool(value))
    return value


def _const_dtype(value: Constant) -> np.dtype:
    if isinstance(value, np.generic):
        return value.dtype
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return np.dtype(np.int64)
    if isinstance(value, float):
        return np.dtype(np.float64)
    if isinstance(value, complex):
        return np.dtype(np.complex128)
    raise UnknownIndexLambdaExpr(f"unsupported constant {value!r} of type "
                                 f"{type(value).__name__}")


def _is_zero(e) -> bool:
    return isinstance(e, (int, np.integer)) and int(e) == 0


def _add(a, b):
    if _is_zero(b):
        return a
    if _is_zero(a):
        return b
    return prim.Sum((a, b))


def _mul(a, b):
    if isinstance(a, (int, np.integer)) and int(a) == 1:
        return b
    if isinstance(b, (int, np.integer)) and int(b) == 1:
        return a
    return prim.Product((a, b))



def cast_expr(value, from_dtype: np.dtype, to_dtype: np.dtype):
    """*value* converted from *from_dtype* to *to_dtype* with NumPy's
    ``astype`` semantics."""
    if from_dtype == to_dtype:
        return value
    if to_dtype == BOOL:
        if from_dtype.kind == "c":
            return prim.LogicalOr((
                prim.Comparison(prim.Call(prim.Variable("real"), (value,)), "!=", 0),
                prim.Comparison(prim.Call(prim.Variable("imag"), (value,)), "!=", 0)))
        return prim.Comparison(value, "!=", 0)
    if from_dtype.kind == "c" and to_dtype.kind != "c":
        value = prim.Call(prim.Variable("real"), (value,))
        from_dtype = _real_dtype(from_dtype)
        if from_dtype == to_dtype:
            return value
    if from_dtype == BOOL:
        from_dtype = np.dtype(np.int8)
    if from_dtype.kind == "f" and to_dtype.kind in "iu":
        return _float_to_integer(value, to_dtype)
    return lp.TypeCast(to_dtype, value)


#: complex functions computed by our helpers (as NumPy computes them)
#: rather than by pyopencl's complex library
_COMPLEX_FUNCTIONS = {"sqrt": "pt_csqrt", "exp": "pt_cexp", "asin": "pt_casin",
                      "acos": "pt_cacos", "atan": "pt_catan", "log10": "pt_clog10"}


def _as_complex(value, from_dtype: np.dtype, to_dtype: np.dtype):
    """*value* as the complex *to_dtype* (a complex argument of a helper)."""
    if from_dtype == to_dtype:
        return value
    return cast_expr(value, from_dtype, to_dtype)


#: accumulator of sums and products of single-precision values
_WIDER_ACCUMULATOR = {np.dtype(np.float32): np.dtype(np.float64),
                      np.dtype(np.complex64): np.dtype(np.complex128)}

_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)
_UINT64 = np.dtype(np.uint64)


def _x86_truncation(value, to_dtype: np.dtype):
    """*value* (a float) truncated to the integer *to_dtype* (``int32`` or
    ``int64``) as x86-64's conversion instructions do it: the
    "integer indefinite" value (the most negative integer) for anything out
    of range, NaN included. OpenCL leaves out-of-range conversions
    undefined, so the range is tested explicitly."""
    bits = 8 * to_dtype.itemsize
    lowest = -(2 ** (bits - 1))
    in_range = prim.LogicalAnd((
        prim.Comparison(value, ">=", float(lowest)),
        prim.Comparison(value, "<", float(2 ** (bits - 1)))))
    # the fallback replaces the float before the conversion: loopy prints
    # an integer constant in its context's type (-9.223372036854776e+18f
    # under a cast to float32 made ~ fail to compile; fuzz seed 5247);
    # -2^(bits-1) is exact in every float type, so converting it is defined
    return lp.TypeCast(to_dtype, prim.If(in_range, value, np.float64(lowest)))


def _float_to_integer(value, to_dtype: np.dtype):
    """NumPy's C cast of a float to an integer type, as compiled for x86-64:
    types narrower than 32 bits go through an ``int32`` conversion and wrap
    (``-1.0`` gives 255 as ``uint8``, ``300.7`` gives 44), ``uint32``
    through ``int64``, ``uint64`` through ``int64`` below 2^63 and directly
    above. Out-of-range values give the "integer indefinite" value of the
    conversion used, as NumPy's scalar loop does (its vector loops may
    differ there: NumPy itself is not consistent beyond the range)."""
    if to_dtype.itemsize < 4:
        return lp.TypeCast(to_dtype, _x86_truncation(value, _INT32))
    if to_dtype == _INT32 or to_dtype == _INT64:
        return _x86_truncation(value, to_dtype)
    via_int64 = lp.TypeCast(to_dtype, _x86_truncation(value, _INT64))
    if to_dtype == _UINT64:
        return prim.If(prim.Comparison(value, "<", 2.0 ** 63), via_int64,
                       lp.TypeCast(to_dtype, value))
    return via_int64    # uint32


def _is_one(d) -> bool:
    return isinstance(d, int) and d == 1


def _same_dim(a, b) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    return a == b


# {{{ scalar expressions

class ScalarLowerer:
    """Translates the scalar expression of one index lambda, evaluated at
    index *idx*, into a loopy expression. ``rec`` returns ``(expression,
    dtype)``; dtypes drive the NumPy-specific translations. Recursion
    depth is that of one index lambda's own expression."""

    def __init__(self, nodes: NodeLowerer, node: IndexLambda, idx: tuple) -> None:
        self.nodes = nodes
        self.node = node
        self.env: dict[str, Expression] = {f"_{i}": v for i, v in enumerate(idx)}

    def rec(self, e) -> tuple[Expression, np.dtype]:
        if isinstance(e, prim.ExpressionNode):
            method = getattr(self, e.mapper_method, None)
            if method is None:
                raise UnknownIndexLambdaExpr(
                    f"the loopy target cannot lower {type(e).__name__} "
                    f"in an index lambda of shape {self.node.shape}")
            result = method(e)
        elif isinstance(e, (np.generic, int, float, complex, bool)):
            result = _const(e), _const_dtype(e)
        else:
            raise UnknownIndexLambdaExpr(
                f"cannot lower {e!r} of type {type(e).__name__} in an index "
                f"lambda of shape {self.node.shape}")
        if result[1].kind == "c":
            # loopy prints complex arithmetic only in a kernel with a
            # complex variable: see functions.with_complex_arithmetic
            self.nodes.helpers_used.add(COMPLEX_VALUES)
        return result

    def recs(self, children):
        return [self.rec(c) for c in children]

    # {{{ leaves

    def map_variable(self, e: prim.Variable):
        name = e.name
        if name in self.env:
            return self.env[name], np.dtype(np.int64)
        binding = self.node.bindings.get(name)
        if binding is None:
            raise UnknownIndexLambdaExpr(
                f"index lambda of shape {self.node.shape} refers to unknown "
                f"variable '{name}'")
        return self.nodes.value_at(binding, ()), binding.dtype

    def map_subscript(self, e: prim.Subscript):
        # index lambdas subscript their bindings by name
        name = cast(prim.Variable, e.aggregate).name
        binding = self.node.bindings.get(name)
        if binding is None:
            raise UnknownIndexLambdaExpr(
                f"index lambda of shape {self.node.shape} subscripts unknown "
                f"array '{name}'")
        index = e.index if isinstance(e.index, tuple) else (e.index,)
        if len(index) != binding.ndim:
            raise UnknownIndexLambdaExpr(
                f"subscript {name}{list(index)} has {len(index)} indices for a "
                f"binding of shape {binding.shape}")
        lowered = tuple(self.rec(i)[0] for i in index)
        return self.nodes.value_at(binding, lowered), binding.dtype

    def map_nan(self, e):
        return prim.NaN(np.float64), np.dtype(np.float64)

    # }}}

    # {{{ arithmetic

    def map_sum(self, e):
        parts = self.recs(e.children)
        dtype = _result_dtype(parts)
        if dtype == BOOL:  # NumPy's add on booleans is "or"
            return prim.LogicalOr(tuple(p for p, _ in parts)), BOOL
        return prim.Sum(tuple(p for p, _ in parts)), dtype

    def map_product(self, e):
        parts = self.recs(e.children)
        dtype = _result_dtype(parts)
        if dtype == BOOL:
            return prim.LogicalAnd(tuple(p for p, _ in parts)), BOOL
        return prim.Product(tuple(p for p, _ in parts)), dtype

    def map_quotient(self, e):
        (a, da), (b, db) = self.rec(e.numerator), self.rec(e.denominator)
        dtype = _result_dtype([(a, da), (b, db)])
        if dtype.kind == "c":
            # NumPy's division (Smith's method; x / 0j is infinite)
            return self._complex_helper("pt_cdiv", dtype, ((a, da), (b, db)))
        return prim.Quotient(a, b), dtype

    def _complex_helper(self, name: str, dtype: np.dtype, args):
        """A complex helper applied to *args* (``(expression, dtype)``
        pairs) cast to *dtype*."""
        cast = tuple(_as_complex(a, d, dtype) for a, d in args)
        return self._helper(name, dtype, cast), dtype

    def _helper(self, name: str, dtype: np.dtype, args):
        self.nodes.helpers_used.add(name)
        return prim.Call(prim.Variable(helper_symbol(name)), tuple(args))

    def map_floor_div(self, e):
        (a, da), (b, db) = self.rec(e.numerator), self.rec(e.denominator)
        dtype = _result_dtype([(a, da), (b, db)])
        a, b = _operand(a, da, dtype), _operand(b, db, dtype)
        if dtype.kind in "iu":
            return self._helper("pt_floordiv", dtype, (a, b)), dtype
        if dtype.kind == "f":
            return self._helper("pt_floordiv", dtype, (a, b)), dtype
        raise UnknownIndexLambdaExpr(f"floor division of {dtype} values")

    def map_remainder(self, e):
        (a, da), (b, db) = self.rec(e.numerator), self.rec(e.denominator)
        dtype = _result_dtype([(a, da), (b, db)])
        if dtype.kind in "iuf":
            a, b = _operand(a, da, dtype), _operand(b, db, dtype)
            return self._helper("pt_mod", dtype, (a, b)), dtype
        raise UnknownIndexLambdaExpr(f"remainder of {dtype} values")

    def map_power(self, e):
        (a, da), (b, db) = self.rec(e.base), self.rec(e.exponent)
        dtype = _result_dtype([(a, da), (b, db)])
        if dtype.kind in "iu":
            a, b = _operand(a, da, dtype), _operand(b, db, dtype)
            return self._helper("pt_ipow", dtype, (a, b)), dtype
        if isinstance(b, (np.generic, int, float)) and b == 0:
            # loopy folds x**0 to the int 1, which C math calls reject
            return dtype.type(1), dtype
        if isinstance(b, (np.generic, int, float)) and b == 1:
            return a, dtype  # exact, also for a complex 0 (cpow gives NaN)
        if dtype.kind == "c":
            # NumPy's complex power: z**0 == 1, 0**p == 0 for real p > 0,
            # small integer exponents by repeated multiplication
            return self._complex_helper("pt_cpow", dtype, ((a, da), (b, db)))
        return prim.Power(a, b), dtype

    def map_left_shift(self, e):
        (a, da), (b, _) = self.rec(e.shiftee), self.rec(e.shift)
        return self._helper("pt_lshift", da, (a, b)), da

    def map_right_shift(self, e):
        (a, da), (b, _) = self.rec(e.shiftee), self.rec(e.shift)
        return self._helper("pt_rshift", da, (a, b)), da

    def map_bitwise_not(self, e):
        a, da = self.rec(e.child)
        if da == BOOL:
            return prim.LogicalNot(a), BOOL
        return prim.BitwiseNot(a), da

    def _bitwise(self, cls, e):
        parts = self.recs(e.children)
        dtype = _result_dtype(parts)
        # C ranks &, ^, | below comparisons (Python above them) and the
        # printer follows Python: "(a | b) * 1" keeps the grouping wherever
        # the result is used (loopy drops casts to the same type)
        one = storage_dtype(dtype).type(1)
        return prim.Product((cls(tuple(p for p, _ in parts)), one)), dtype

    def map_bitwise_and(self, e):
        return self._bitwise(prim.BitwiseAnd, e)

    def map_bitwise_or(self, e):
        return self._bitwise(prim.BitwiseOr, e)

    def map_bitwise_xor(self, e):
        return self._bitwise(prim.BitwiseXor, e)

    def map_comparison(self, e):
        (a, da), (b, db) = self.rec(e.left), self.rec(e.right)
        if da.kind == "c" or db.kind == "c":
            if da.kind != "c" or db.kind != "c":
                raise UnknownIndexLambdaExpr("comparison of complex and real")
            re = prim.Call(prim.Variable("real"), (a,)), \
                prim.Call(prim.Variable("real"), (b,))
            im = prim.Call(prim.Variable("imag"), (a,)), \
                prim.Call(prim.Variable("imag"), (b,))
            if e.operator not in ("==", "!="):
                # NumPy orders complex numbers lexicographically
                strict = e.operator[0]
                return prim.LogicalOr((
                    prim.Comparison(re[0], strict, re[1]),
                    prim.LogicalAnd((prim.Comparison(re[0], "==", re[1]),
                                     prim.Comparison(im[0], e.operator, im[1]))))), BOOL
            if e.operator == "==":
                return prim.LogicalAnd((prim.Comparison(re[0], "==", re[1]),
                                        prim.Comparison(im[0], "==", im[1]))), BOOL
            return prim.LogicalOr((prim.Comparison(re[0], "!=", re[1]),
                                   prim.Comparison(im[0], "!=", im[1]))), BOOL
        # C has two precedence levels for comparisons (relational above
        # equality) that the printer does not distinguish: parenthesise a
        # comparison nested in another one through a cast
        if isinstance(a, prim.Comparison):
            a = lp.TypeCast(np.dtype(np.int8), a)
        if isinstance(b, prim.Comparison):
            b = lp.TypeCast(np.dtype(np.int8), b)
        if {da.kind, db.kind} == {"i", "u"} and not _non_negative_constant(a) \
                and not _non_negative_constant(b):
            return _mixed_sign_comparison(a, da, e.operator, b, db), BOOL
        return prim.Comparison(a, e.operator, b), BOOL

    def _truth(self, part):
        """A C truth value for a lowered ``(value, dtype)``: complex
        values are true when nonzero, as in NumPy."""
        value, dtype = part
        return cast_expr(value, dtype, BOOL) if dtype.kind == "c" else value

    def map_logical_not(self, e):
        return prim.LogicalNot(self._truth(self.rec(e.child))), BOOL

    def map_logical_and(self, e):
        return prim.LogicalAnd(tuple(self._truth(p)
                                     for p in self.recs(e.children))), BOOL

    def map_logical_or(self, e):
        return prim.LogicalOr(tuple(self._truth(p)
                                    for p in self.recs(e.children))), BOOL

    def map_if(self, e):
        c = self._truth(self.rec(e.condition))
        (t, dt), (f, df) = self.rec(e.then), self.rec(e.else_)
        dtype = _result_dtype([(t, dt), (f, df)])
        if dtype == _UINT64 and not isinstance(
                c, (prim.Comparison, prim.LogicalAnd, prim.LogicalOr,
                    prim.LogicalNot)):
            # loopy types an If by promoting its condition's type with its
            # branches' (an int8 boolean and uint64 give float64: no gather
            # index); a comparison is typed bool
            c = prim.Comparison(c, "!=", 0)
        return prim.If(c, t, f), dtype

    def map_min(self, e):
        parts = self.recs(e.children)
        return prim.Min(tuple(p for p, _ in parts)), _result_dtype(parts)

    def map_max(self, e):
        parts = self.recs(e.children)
        return prim.Max(tuple(p for p, _ in parts)), _result_dtype(parts)

    def map_call(self, e):
        name = getattr(e.function, "name", "")
        if not name.startswith(C99_FUNCTION_PREFIX):
            raise UnknownIndexLambdaExpr(f"unknown function '{name}' in index "
                                         f"lambda of shape {self.node.shape}")
        fname = name[len(C99_FUNCTION_PREFIX):]
        args = self.recs(e.parameters)
        dtype = _result_dtype(args)
        (a0, d0) = args[0]
        if fname == "isnan":
            if d0.kind == "c":
                re = prim.Call(prim.Variable("real"), (a0,))
                im = prim.Call(prim.Variable("imag"), (a0,))
                return prim.LogicalOr((prim.Comparison(re, "!=", re),
                                       prim.Comparison(im, "!=", im))), BOOL
            if d0.kind != "f":
                return np.int8(0), BOOL
            return prim.Comparison(a0, "!=", a0), BOOL
        if fname in ("real", "imag", "conj") and d0.kind != "c":
            if fname == "imag":
                return d0.type(0), d0
            return a0, d0
        if fname == "abs":
            if d0 == BOOL:
                return a0, d0
            if d0.kind == "u":
                return a0, d0
            if d0.kind == "i":
                # NumPy's abs wraps for the most negative value
                return prim.If(prim.Comparison(a0, "<", 0),
                               prim.Product((d0.type(-1), a0)), a0), d0
        if d0.kind == "c" and fname in _COMPLEX_FUNCTIONS:
            return self._complex_helper(_COMPLEX_FUNCTIONS[fname], d0, args[:1])
        lname = _FUNCTION_NAMES.get(fname)
        if lname is None:
            raise UnknownIndexLambdaExpr(f"unknown function '{fname}' in index "
                                         f"lambda of shape {self.node.shape}")
        if fname in ("abs", "real", "imag") and d0.kind == "c":
            dtype = _real_dtype(d0)
        return prim.Call(prim.Variable(lname), tuple(a for a, _ in args)), dtype

    def map_type_cast(self, e: TypeCast):
        value, dtype = self.rec(e.inner_expr)
        return cast_expr(value, dtype, np.dtype(e.dtype)), np.dtype(e.dtype)

    def map_reduce(self, e: Reduce):
        saved = {}
        inames = []
        for name, (lo, hi) in e.bounds.items():
            lo_e = self._bound(lo)
            hi_e = self._bound(hi)
            var = self.nodes.new_iname(lo_e, hi_e)
            saved[name] = self.env.get(name)
            self.env[name] = var
            inames.append(var.name)
        try:
            inner, dtype = self.rec(e.inner_expr)
        finally:
            for name, old in saved.items():
                if old is None:
                    del self.env[name]
                else:
                    self.env[name] = old
        op = e.op.name
        if op in ("sum", "product"):
            if dtype == BOOL:
                dtype = np.dtype(np.int64)
                inner = lp.TypeCast(dtype, inner)
            wide = _WIDER_ACCUMULATOR.get(dtype)
            if wide is not None:
                # single precision accumulates in double: a long float32
                # sum in order would lose digits NumPy's pairwise sum
                # keeps; the result is rounded to single precision once
                red = lp.Reduction(op, tuple(inames), lp.TypeCast(wide, inner))
                return lp.TypeCast(dtype, red), dtype
            return lp.Reduction(op, tuple(inames), inner), dtype
        if op in ("any", "all"):
            flag = prim.If(inner, np.int32(1), np.int32(0))
            red = lp.Reduction("max" if op == "any" else "min",
                               tuple(inames), flag)
            return prim.Comparison(red, ">", 0), BOOL
        if op in ("max", "min"):
            if dtype == BOOL:
                flag = prim.If(inner, np.int32(1), np.int32(0))
                return prim.Comparison(lp.Reduction(op, tuple(inames), flag),
                                       ">", 0), BOOL
            red = lp.Reduction(op, tuple(inames), inner)
            if dtype.kind == "f":
                # loopy's max/min are fmax/fmin, which drop NaN; NumPy
                # propagates it. A second pass over the same range finds
                # NaNs (its inames are fresh copies of the first ones).
                nan_inames = []
                subst = {}
                for (name, lo, hi) in list(self.nodes.reduction_inames):
                    if name in inames:
                        v = self.nodes.new_iname(lo, hi)
                        subst[name] = v
                        nan_inames.append(v.name)
                from pymbolic.mapper.substitutor import make_subst_func

                from loopy.symbolic import SubstitutionMapper
                inner2 = SubstitutionMapper(make_subst_func(subst))(inner)
                is_nan = prim.If(prim.Comparison(inner2, "!=", inner2),
                                 np.int32(1), np.int32(0))
                any_nan = lp.Reduction("max", tuple(nan_inames), is_nan)
                return prim.If(prim.Comparison(any_nan, ">", 0),
                               prim.NaN(dtype.type), red), dtype
            if dtype.kind == "c":
                return self._complex_extremum(op, inames, inner, dtype), dtype
            if dtype.kind in "iu" and dtype.itemsize < 4:
                # loopy has no neutral element for narrow integers
                red = lp.Reduction(op, tuple(inames),
                                   lp.TypeCast(np.dtype(np.int32), inner))
                return lp.TypeCast(dtype, red), dtype
            if dtype == np.uint32 and op == "min":
                # loopy's neutral element UINT_MAX is untyped: as int64
                red = lp.Reduction(op, tuple(inames), lp.TypeCast(_INT64, inner))
                return lp.TypeCast(dtype, red), dtype
            if dtype == _UINT64 and op == "min":
                # (ULONG_MAX likewise): min(x) == ~max(~x), max starts at 0
                red = lp.Reduction("max", tuple(inames), prim.BitwiseNot(inner))
                return prim.BitwiseNot(red), dtype
            return red, dtype
        raise UnknownIndexLambdaExpr(f"unknown reduction '{op}'")

    def _complex_extremum(self, op, inames, inner, dtype):
        """NumPy orders complex numbers lexicographically: the extreme
        real part, then the extreme imaginary part among the elements
        having it. (The inner reduction is re-evaluated per element of the
        outer one: quadratic, but complex max/min are rare.)"""
        from pymbolic.mapper.substitutor import make_subst_func

        from loopy.symbolic import SubstitutionMapper
        rtype = _real_dtype(dtype)
        re_part = lp.Reduction(op, tuple(inames),
                               prim.Call(prim.Variable("real"), (inner,)))
        subst = {}
        for name, lo, hi in list(self.nodes.reduction_inames):
            if name in inames:
                subst[name] = self.nodes.new_iname(lo, hi)
        inner2 = SubstitutionMapper(make_subst_func(subst))(inner)
        subst3 = {}
        for name, lo, hi in list(self.nodes.reduction_inames):
            if name in inames:
                subst3[name] = self.nodes.new_iname(lo, hi)
        re_part3 = lp.Reduction(op, tuple(v.name for v in subst3.values()),
                                prim.Call(prim.Variable("real"), (
                                    SubstitutionMapper(make_subst_func(subst3))(
                                        inner),)))
        worst = rtype.type(-np.inf if op == "max" else np.inf)
        im_part = lp.Reduction(
            op, tuple(v.name for v in subst.values()),
            prim.If(prim.Comparison(prim.Call(prim.Variable("real"), (inner2,)),
                                    "==", re_part3),
                    prim.Call(prim.Variable("imag"), (inner2,)), worst))
        return prim.Sum((lp.TypeCast(dtype, re_part),
                         prim.Product((lp.TypeCast(dtype, im_part),
                                       dtype.type(1j)))))

    def _bound(self, b):
        if isinstance(b, Array):
            return self.nodes.dim_expr(b)
        if isinstance(b, (int, np.integer)):
            return int(b)
        return self.rec(b)[0]

    # }}}


def _result_dtype(parts) -> np.dtype:
    dtypes = [d for _, d in parts]
    first = dtypes[0]
    if all(d == first for d in dtypes):
        return first
    # Python scalars are weak (NEP 50): uint64 % 2 stays uint64 (typing
    # the 2 as int64 made it float64: a float gather index)
    strong = [d for p, d in parts if type(p) not in (int, float, complex)]
    weak = [p for p, d in parts if type(p) in (int, float, complex)]
    if strong and weak:
        try:
            return np.result_type(*strong, *weak)
        except (OverflowError, TypeError, ValueError):
            pass
    return np.result_type(*dtypes)


def _non_negative_constant(value) -> bool:
    return bool(isinstance(value, (int, np.integer)) and not isinstance(
        value, (bool, np.bool_)) and value >= 0)


def _mixed_sign_comparison(a, da: np.dtype, op: str, b, db: np.dtype):
    """``a op b`` for a signed and an unsigned integer, exact as NumPy
    compares them (C would convert the signed one to unsigned: -3 > 5u)."""
    common = np.result_type(da, db)
    if common.kind in "iu":     # a type holding both: compare there
        return prim.Comparison(_operand(a, da, common), op,
                               _operand(b, db, common))
    # int64 and uint64: a negative signed side decides alone
    u64 = np.dtype(np.uint64)
    if da.kind == "i":
        negative, cmp = (prim.Comparison(a, "<", 0),
                         prim.Comparison(_operand(a, da, u64), op, b))
        true_if_negative = op in ("<", "<=", "!=")
    else:
        negative, cmp = (prim.Comparison(b, "<", 0),
                         prim.Comparison(a, op, _operand(b, db, u64)))
        true_if_negative = op in (">", ">=", "!=")
    if true_if_negative:
        return prim.LogicalOr((negative, cmp))
    return prim.LogicalAnd((prim.LogicalNot(negative), cmp))


def _operand(value, from_dtype: np.dtype, to_dtype: np.dtype):
    """An operand of a helper typed on its arguments, as *to_dtype* (a
    helper would otherwise be typed by promoting int64 literals)."""
    if from_dtype == to_dtype:
        return value
    if type(value) in (int, float):
        return to_dtype.type(value)
    return cast_expr(value, from_dtype, to_dtype)

# }}}


def uniquify_reduction_inames(expr, nodes: NodeLowerer):
    """*expr* with every repeated occurrence of a reduction given fresh
    inames (nested reductions included). Lowering may repeat a reduction
    when an expression uses a value twice (``abs``, ``maximum``, guarded
    gathers); loopy needs distinct inames for each occurrence."""
    # pymbolic's uncached mapper: loopy's caches by expression and would
    # hand back the first occurrence for every repeated one
    from pymbolic.mapper import IdentityMapper

    bounds = {name: (lo, hi) for name, lo, hi in nodes.reduction_inames}
    seen: set[str] = set()

    class Renamer(IdentityMapper):
        def __init__(self, renames):
            super().__init__()
            self.renames = renames

        def map_variable(self, expr, *args):
            new = self.renames.get(expr.name)
            return prim.Variable(new) if new is not None else expr

        def map_type_cast(self, expr, *args):
            return lp.TypeCast(expr.type, self.rec(expr.child, *args))

        def map_reduction(self, expr, *args):
            renames = dict(self.renames)
            inames = []
            for name in expr.inames:
                if name in seen:
                    lo, hi = bounds[name]
                    fresh = nodes.new_iname(lo, hi).name
                    bounds[fresh] = (lo, hi)
                    renames[name] = fresh
                    name = fresh
                seen.add(name)
                inames.append(name)
            body = Renamer(renames).rec(expr.expr, *args)
            return lp.Reduction(expr.operation, tuple(inames), body,
                                allow_simultaneous=expr.allow_simultaneous)

    return Renamer({})(expr)
