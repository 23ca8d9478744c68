"""OpenCL helper functions giving NumPy semantics where C differs.

Each helper is a loopy :class:`~loopy.ScalarCallable` specialised per
argument dtype; its C definition goes into the kernel preamble.

================  ==========================================================
helper            NumPy behaviour reproduced
================  ==========================================================
``pt_floordiv``   ``//``: floors; integer ``x // 0 == 0`` and the most
                  negative value ``// -1`` wraps; floats follow
                  ``npy_floor_divide``
``pt_mod``        ``%``: result has the divisor's sign; integer ``x % 0 == 0``
``pt_ipow``       integer ``**`` by repeated squaring, wrapping
``pt_lshift``     ``<<``: shifts by the bit width or more give 0
``pt_rshift``     ``>>``: shifts by the bit width or more give 0 or -1
``pt_cdiv``       complex ``/`` (Smith's method, infinite for a zero divisor)
``pt_cpow``       complex ``**`` (NumPy's special cases and integer powers)
``pt_csqrt``      complex ``sqrt`` without premature overflow
``pt_cexp``       complex ``exp`` past ``exp(709)``, C99 infinities and NaNs
``pt_casin``      complex ``arcsin``, ``arccos`` (Kahan's formulas),
``pt_cacos``      ``arctan`` (logarithms)
``pt_catan``
``pt_clog10``     complex ``log10`` (``log`` scaled by ``log10(e)``)
================  ==========================================================

:func:`with_complex_arithmetic` (applied by :func:`register_helpers` when
the lowering reports complex values) makes loopy print complex arithmetic
in a kernel whose complex values are all intermediate.
"""

from __future__ import annotations

import numpy as np
from constantdict import constantdict
from loopy.kernel.function_interface import ScalarCallable
from loopy.types import NumpyType

_C_TYPES = {
    "int8": "char", "int16": "short", "int32": "int", "int64": "long",
    "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
    "float32": "float", "float64": "double",
}


def _unsigned(dtype: np.dtype) -> str:
    return _C_TYPES["uint" + str(dtype.itemsize * 8)]


def _definition(name: str, dtype: np.dtype, fname: str) -> str:
    t = _C_TYPES[dtype.name]
    u = _unsigned(dtype) if dtype.kind in "iu" else None
    bits = dtype.itemsize * 8
    head = f"static inline {t} {fname}({t} a, {t} b)\n{{\n"
    if name == "pt_floordiv":
        if dtype.kind == "f":
            body = (f"  if (b == 0) return a / b;\n"
                    f"  {t} mod = fmod(a, b);\n"
                    f"  {t} div = (a - mod) / b;\n"
                    f"  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;\n"
                    f"  if (div != 0) {{\n"
                    f"    {t} fl = floor(div);\n"
                    f"    if (div - fl > ({t}) 0.5) fl += 1;\n"
                    f"    return fl;\n"
                    f"  }}\n"
                    f"  return copysign(({t}) 0, a / b);\n")
        elif dtype.kind == "u":
            body = "  return b == 0 ? 0 : a / b;\n"
        else:
            body = (f"  if (b == 0) return 0;\n"
                    f"  if (b == -1) return ({t}) (({u}) 0 - ({u}) a);\n"
                    f"  {t} q = a / b;\n"
                    f"  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;\n"
                    f"  return q;\n")
    elif name == "pt_mod":
        if dtype.kind == "f":
            body = (f"  if (b == 0) return fmod(a, b);\n"
                    f"  {t} mod = fmod(a, b);\n"
                    f"  if (mod != 0) {{ if ((b < 0) != (mod < 0)) mod += b; }}\n"
                    f"  else mod = copysign(({t}) 0, b);\n"
                    f"  return mod;\n")
        elif dtype.kind == "u":
            body = "  return b == 0 ? 0 : a % b;\n"
        else:
            body = (f"  if (b == 0 || b == -1) return 0;\n"
                    f"  {t} r = a % b;\n"
                    f"  if (r != 0 && ((r < 0) != (b < 0))) r += b;\n"
                    f"  return r;\n")
    elif name == "pt_ipow":
        body = (f"  {u} result = 1, base = ({u}) a;\n"
                f"  if (b < 0) return a == 1 ? 1 : 0;\n"
                f"  while (b) {{ if (b & 1) result *= base; base *= base; b >>= 1; }}\n"
                f"  return ({t}) result;\n")
    elif name == "pt_lshift":
        body = (f"  if (b < 0 || b >= {bits}) return 0;\n"
                f"  return ({t}) (({u}) a << b);\n")
    elif name == "pt_rshift":
        if dtype.kind == "u":
            body = f"  return (b < 0 || b >= {bits}) ? 0 : (a >> b);\n"
        else:
            body = f"  return (b < 0 || b >= {bits}) ? (a < 0 ? -1 : 0) : (a >> b);\n"
    else:  # pragma: no cover
        raise KeyError(name)
    return head + body + "}\n"


def _source_digest() -> str:
    import hashlib
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:8]


#: digest of this module: part of every helper's symbol, because loopy
#: caches generated code by kernel structure, in which a helper is only its
#: name and types (an edited helper must change name to be generated anew)
HELPERS_VERSION = _source_digest()


def helper_symbol(name: str) -> str:
    """The function name lowered expressions call for helper *name*."""
    return f"{name}__v{HELPERS_VERSION}"


def _base_name(symbol: str) -> str:
    return symbol.split("__v", 1)[0]


class NumpySemanticsFunction(ScalarCallable):
    """A two-argument helper from the table above, typed on use."""

    @property
    def base(self) -> str:
        return _base_name(self.name)

    def with_types(self, arg_id_to_dtype, clbl_inf_ctx):
        dtypes = [arg_id_to_dtype.get(i) for i in range(2)]
        if any(d is None for d in dtypes):
            return self.copy(arg_id_to_dtype=arg_id_to_dtype), clbl_inf_ctx
        np_dtypes = [d.numpy_dtype for d in dtypes]
        if self.base in ("pt_lshift", "pt_rshift"):
            dtype = np_dtypes[0]
        else:
            dtype = np.result_type(*np_dtypes)
        lt = NumpyType(dtype)
        return (self.copy(name_in_target=f"{self.base}_{dtype.name}",
                          arg_id_to_dtype=constantdict({0: lt, 1: lt, -1: lt})),
                clbl_inf_ctx)

    def generate_preambles(self, target):
        if self.name_in_target is None:
            return
        dtype = self.arg_id_to_dtype[-1].numpy_dtype
        yield (f"50_{self.name_in_target}",
               _definition(self.base, dtype, self.name_in_target))


HELPER_NAMES = ("pt_floordiv", "pt_mod", "pt_ipow", "pt_lshift", "pt_rshift")


# {{{ complex helpers

#: helper -> number of arguments; each takes and returns complex values
COMPLEX_HELPERS = {"pt_cdiv": 2, "pt_cpow": 2, "pt_csqrt": 1, "pt_cexp": 1,
                   "pt_casin": 1, "pt_cacos": 1, "pt_catan": 1, "pt_clog10": 1}


def _complex_division(t: str, r: str, p: str, fname: str) -> str:
    """C of NumPy's complex division (Smith's method; a zero divisor gives
    infinities or NaN as the real division of each part by zero does)."""
    return (
        f"static inline {t} {fname}({t} a, {t} b)\n{{\n"
        f"  {r} ar = a.real, ai = a.imag, br = b.real, bi = b.imag;\n"
        f"  {r} abr = fabs(br), abi = fabs(bi);\n"
        f"  if (abr >= abi) {{\n"
        f"    if (abr == 0 && abi == 0)\n"
        f"      return {p}_new(ar / abr, ai / abr);\n"
        f"    {r} rat = bi / br, scl = ({r}) 1 / (br + bi * rat);\n"
        f"    return {p}_new((ar + ai * rat) * scl, (ai - ar * rat) * scl);\n"
        f"  }}\n"
        f"  {r} rat = br / bi, scl = ({r}) 1 / (bi + br * rat);\n"
        f"  return {p}_new((ar * rat + ai) * scl, (ai * rat - ar) * scl);\n"
        f"}}\n")


def _complex_definition(name: str, dtype: np.dtype, fname: str) -> str:
    """C of complex helper *name* for *dtype* (complex64 or complex128),
    on pyopencl's complex types and functions. Each follows what NumPy
    computes: division by Smith's method with a zero divisor giving
    infinities, ``z**0 == 1`` and ``0**p == 0`` for real ``p > 0``, small
    integer powers by multiplication, ``sqrt`` and ``exp`` without
    premature overflow."""
    double = dtype == np.complex128
    t, r, p = (("cdouble_t", "double", "cdouble") if double
               else ("cfloat_t", "float", "cfloat"))
    big = "1e300" if double else "1e36f"
    exp_limit = "709.0" if double else "88.0f"
    if name == "pt_cdiv":
        return _complex_division(t, r, p, fname)
    if name == "pt_cpow":
        recip = f"{fname}_divide"     # its own copy: one definition per name
        return _complex_division(t, r, p, recip) + (
            f"static inline {t} {fname}({t} a, {t} b)\n{{\n"
            f"  {r} br = b.real, bi = b.imag;\n"
            f"  if (br == 0 && bi == 0) return {p}_new(1, 0);\n"
            f"  if (a.real == 0 && a.imag == 0) {{\n"
            f"    if (br > 0 && bi == 0) return {p}_new(0, 0);\n"
            f"    return {p}_new(NAN, NAN);\n"
            f"  }}\n"
            f"  if (bi == 0 && fabs(br) < 100 && br == ({r}) (long) br) {{\n"
            f"    long n = (long) br, m = n < 0 ? -n : n;\n"
            f"    {t} result = {p}_new(1, 0), base = a;\n"
            f"    while (m) {{\n"
            f"      if (m & 1) result = {p}_mul(result, base);\n"
            f"      base = {p}_mul(base, base);\n"
            f"      m >>= 1;\n"
            f"    }}\n"
            f"    return n < 0 ? {recip}({p}_new(1, 0), result) : result;\n"
            f"  }}\n"
            f"  return {p}_pow(a, b);\n"
            f"}}\n")
    if name == "pt_csqrt":
        return (
            f"static inline {t} {fname}({t} a)\n{{\n"
            f"  if (isfinite(a.real) && isfinite(a.imag)\n"
            f"      && (fabs(a.real) > {big} || fabs(a.imag) > {big})) {{\n"
            f"    {t} s = {p}_sqrt({p}_new(a.real * ({r}) 0.25, a.imag * ({r}) 0.25));\n"
            f"    return {p}_new(s.real * 2, s.imag * 2);\n"
            f"  }}\n"
            f"  return {p}_sqrt(a);\n"
            f"}}\n")
    if name == "pt_cexp":
        return (
            f"static inline {t} {fname}({t} a)\n{{\n"
            f"  {r} x = a.real, y = a.imag;\n"
            # C99 Annex G: infinite and NaN arguments
            f"  if (isinf(x)) {{\n"
            f"    if (x > 0) {{\n"
            f"      if (y == 0) return {p}_new(x, y);\n"
            f"      if (!isfinite(y)) return {p}_new(x, NAN);\n"
            f"      return {p}_new(x * cos(y), x * sin(y));\n"
            f"    }}\n"
            f"    if (!isfinite(y)) return {p}_new(0, 0);\n"
            f"    return {p}_new(0 * cos(y), 0 * sin(y));\n"
            f"  }}\n"
            f"  if (isnan(x)) return y == 0 ? {p}_new(x, y) : {p}_new(NAN, NAN);\n"
            f"  if (!isfinite(y)) return {p}_new(NAN, NAN);\n"
            f"  if (a.real > {exp_limit}) {{\n"
            f"    {r} e = exp(a.real * ({r}) 0.5);\n"
            f"    return {p}_new((e * cos(a.imag)) * e, (e * sin(a.imag)) * e);\n"
            f"  }}\n"
            f"  return {p}_exp(a);\n"
            f"}}\n")
    # Kahan's formulas (branch cuts and signed zeros as C99 wants them):
    # with s1 = sqrt(1 - z), s2 = sqrt(1 + z),
    # asin z = atan2(x, re(s1 s2)) + i asinh(im(conj(s1) s2)),
    # acos z = 2 atan2(re s1, re s2) + i asinh(im(conj(s2) s1));
    # atan z = i/2 (log(1 - i z) - log(1 + i z))
    # (square roots whose imaginary part takes the sign of the argument's,
    # -0 included, as C99's csqrt)
    roots = (f"  {t} s1 = {p}_sqrt({p}_new(1 - z.real, fabs(z.imag)));\n"
             f"  s1.imag = copysign(s1.imag, -z.imag);\n"
             f"  {t} s2 = {p}_sqrt({p}_new(1 + z.real, fabs(z.imag)));\n"
             f"  s2.imag = copysign(s2.imag, z.imag);\n")
    if name == "pt_casin":
        body = roots + (
            f"  return {p}_new(atan2(z.real, s1.real * s2.real - s1.imag * s2.imag),\n"
            f"                 asinh(s1.real * s2.imag - s1.imag * s2.real));\n")
    elif name == "pt_cacos":
        body = roots + (
            f"  return {p}_new(2 * atan2(s1.real, s2.real),\n"
            f"                 asinh(s2.real * s1.imag - s2.imag * s1.real));\n")
    elif name == "pt_catan":
        body = (
            f"  {t} one = {p}_new(1, 0), iz = {p}_new(-z.imag, z.real);\n"
            f"  {t} d = {p}_sub({p}_log({p}_sub(one, iz)), {p}_log({p}_add(one, iz)));\n"
            f"  return {p}_new(-d.imag * ({r}) 0.5, d.real * ({r}) 0.5);\n")
    elif name == "pt_clog10":
        # NumPy scales both parts of the natural logarithm by log10(e)
        e = "0.434294481903251827651128918916605082" + ("" if double else "f")
        body = (f"  {t} l = {p}_log(z);\n"
                f"  return {p}_new(l.real * {e}, l.imag * {e});\n")
    else:  # pragma: no cover
        raise KeyError(name)
    return f"static inline {t} {fname}({t} z)\n{{\n" + body + "}\n"


class ComplexSemanticsFunction(ScalarCallable):
    """A complex helper of :data:`COMPLEX_HELPERS`, typed on use (the
    arguments are complex of one dtype: the lowering casts them)."""

    @property
    def base(self) -> str:
        return _base_name(self.name)

    def with_types(self, arg_id_to_dtype, clbl_inf_ctx):
        nargs = COMPLEX_HELPERS[self.base]
        dtypes = [arg_id_to_dtype.get(i) for i in range(nargs)]
        if any(d is None for d in dtypes):
            return self.copy(arg_id_to_dtype=arg_id_to_dtype), clbl_inf_ctx
        dtype = np.result_type(*(d.numpy_dtype for d in dtypes))
        lt = NumpyType(dtype)
        types = {i: lt for i in range(nargs)}
        types[-1] = lt
        return (self.copy(name_in_target=f"{self.base}_{dtype.name}",
                          arg_id_to_dtype=constantdict(types)),
                clbl_inf_ctx)

    def generate_preambles(self, target):
        if self.name_in_target is None:
            return
        dtype = self.arg_id_to_dtype[-1].numpy_dtype
        yield (f"51_{self.name_in_target}",
               _complex_definition(self.base, dtype, self.name_in_target))

# }}}


#: not a function: the lowering adds this name to the helpers of a kernel
#: that computes complex values (see :func:`with_complex_arithmetic`)
COMPLEX_VALUES = "pt_complex_values"


def with_complex_arithmetic(t_unit):
    """*t_unit* with loopy's complex arithmetic enabled.

    loopy prints complex ``+``, ``*``, ``-`` as ``cfloat_add``,
    ``cfloat_mul``, ... only in a kernel with a complex argument or
    temporary variable (its ``allow_complex``, decided once per kernel);
    elsewhere it prints plain C operators, which do not compile for
    ``cfloat_t`` values. A kernel whose complex values are all
    intermediate (``real(-x.astype(complex64))`` of a real ``x``; fuzz
    seeds 7887, 8845, 9745) gets an unused private complex scalar.
    """
    import loopy as lp
    knl = t_unit.default_entrypoint
    variables = [*knl.args, *knl.temporary_variables.values()]
    if any(v.dtype is not None and v.dtype.involves_complex()
           for v in variables):
        return t_unit
    name = knl.get_var_name_generator()("_pt_complex_arith")
    tv = lp.TemporaryVariable(name, np.complex64, shape=(),
                              address_space=lp.AddressSpace.PRIVATE)
    return t_unit.with_kernel(knl.copy(
        temporary_variables={**knl.temporary_variables, name: tv}))


def register_helpers(t_unit, names):
    """*t_unit* with the helpers in *names* registered (and complex
    arithmetic enabled if *names* holds :data:`COMPLEX_VALUES`)."""
    import loopy as lp
    if COMPLEX_VALUES in names:
        t_unit = with_complex_arithmetic(t_unit)
        names = set(names) - {COMPLEX_VALUES}
    for name in sorted(names):
        symbol = helper_symbol(name)
        clbl = (ComplexSemanticsFunction(symbol) if name in COMPLEX_HELPERS
                else NumpySemanticsFunction(symbol))
        t_unit = lp.register_callable(t_unit, symbol, clbl)
    return t_unit
