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
================  ==========================================================
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


class NumpySemanticsFunction(ScalarCallable):
    """A two-argument helper from the table above, typed on use."""

    def with_types(self, arg_id_to_dtype, clbl_inf_ctx):
        dtypes = [arg_id_to_dtype.get(i) for i in range(2)]
        if any(d is None for d in dtypes):
            return self.copy(arg_id_to_dtype=arg_id_to_dtype), clbl_inf_ctx
        np_dtypes = [d.numpy_dtype for d in dtypes]
        if self.name in ("pt_lshift", "pt_rshift"):
            dtype = np_dtypes[0]
        else:
            dtype = np.result_type(*np_dtypes)
        lt = NumpyType(dtype)
        return (self.copy(name_in_target=f"{self.name}_{dtype.name}",
                          arg_id_to_dtype=constantdict({0: lt, 1: lt, -1: lt})),
                clbl_inf_ctx)

    def generate_preambles(self, target):
        if self.name_in_target is None:
            return
        dtype = self.arg_id_to_dtype[-1].numpy_dtype
        yield (f"50_{self.name_in_target}",
               _definition(self.name, dtype, self.name_in_target))


HELPER_NAMES = ("pt_floordiv", "pt_mod", "pt_ipow", "pt_lshift", "pt_rshift")


def register_helpers(t_unit, names):
    """*t_unit* with the helpers in *names* registered."""
    import loopy as lp
    for name in sorted(names):
        t_unit = lp.register_callable(t_unit, name, NumpySemanticsFunction(name))
    return t_unit
