"""Running the kernel of a :func:`~pytato_like.loopy.call_loopy` node on the
host, for the NumPy target.

The NumPy target has no OpenCL device, so it runs the user's loopy kernel
through loopy's own C target (:class:`loopy.ExecutableCTarget`, compiled
by the system C compiler through :mod:`codepy`, both loopy dependencies):

* the unit the call's types were inferred from is retargeted to C before
  inference (a unit whose source is not known in this process, e.g. an
  unpickled call, is retargeted kernel by kernel);
* callee kernels are inlined into the entrypoint (loopy's C executor
  builds one library per entrypoint);
* hardware-axis and other implementation tags of inames are dropped (plain
  C has no work-groups): every loop runs sequentially, which is the
  kernel's meaning; automatic array offsets become 0 (host arguments are
  passed contiguous);
* loopy generates the C code; it is compiled once per translation unit
  and entrypoint (:class:`HostKernel`) and called through :mod:`ctypes`
  with the arguments its C function declares, arrays laid out with the
  strides the kernel declares and outputs allocated likewise.

A kernel the C target cannot express (local memory with barriers, an
OpenCL-only function) raises
:class:`~pytato_like.diagnostic.UnsupportedArrayError` naming the kernel
and loopy's reason. Indices are not bounds-checked (as on the device).

.. autofunction:: run_loopy_call_on_host
.. autoclass:: HostKernel
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, cast

import numpy as np

from pytato_like.diagnostic import UnsupportedArrayError
from pytato_like.loopy import SOURCE_UNITS

if TYPE_CHECKING:
    import cgen

    import loopy as lp
    from loopy.kernel.data import KernelArgument
    from loopy.target import TargetBase
    from loopy.target.c.c_execution import CCompiler
    from loopy.types import LoopyType

    from pytato_like.loopy import LoopyCall

__all__ = ["run_loopy_call_on_host"]

#: (id of a typed unit, entrypoint) -> (that unit, its HostKernel)
_EXECUTORS: dict[tuple[int, str], tuple[lp.TranslationUnit, HostKernel]] = {}
_MAX_EXECUTORS = 64
_LOCK = threading.Lock()


def _for_plain_c(kernel: lp.LoopKernel) -> lp.LoopKernel:
    """*kernel* without iname implementation tags, and with arrays at
    offset 0 (host arrays are passed contiguous; loopy's C executor
    passes automatic offsets in the wrong order)."""
    import loopy as lp
    from loopy.kernel.array import ArrayBase
    from loopy.kernel.data import InameImplementationTag
    args = [arg.copy(offset=0) if isinstance(arg, ArrayBase)
            and arg.offset is lp.auto else arg for arg in kernel.args]
    if any(a is not b for a, b in zip(args, kernel.args, strict=True)):
        kernel = kernel.copy(args=args)
    inames = {}
    changed = False
    for name, iname in kernel.inames.items():
        tags = frozenset(t for t in iname.tags
                         if not isinstance(t, InameImplementationTag))
        if tags != iname.tags:
            changed = True
            iname = iname.copy(tags=tags)
        inames[name] = iname
    return kernel.copy(inames=inames) if changed else kernel


def _retargeted(unit: lp.TranslationUnit, target: TargetBase
                ) -> lp.TranslationUnit:
    """*unit* with every kernel on *target* (for a unit loopy's ``copy``
    refuses to retarget: its kernels' calls are resolved already)."""
    import dataclasses

    from constantdict import constantdict

    from loopy.kernel.function_interface import CallableKernel
    table = {}
    for name, clbl in unit.callables_table.items():
        if isinstance(clbl, CallableKernel):
            clbl = clbl.copy(subkernel=clbl.subkernel.copy(target=target))
        table[name] = clbl
    return dataclasses.replace(unit, callables_table=constantdict(table),
                               target=target)


def c_translation_unit(typed_unit: lp.TranslationUnit, entrypoint: str
                       ) -> lp.TranslationUnit:
    """The unit of a :class:`~pytato_like.loopy.LoopyCall` (*typed_unit*)
    as a loopy unit on :class:`loopy.ExecutableCTarget`, callees inlined,
    without iname implementation tags and automatic offsets."""
    import loopy as lp
    from loopy.kernel.function_interface import CallableKernel

    target = lp.ExecutableCTarget(compiler=_compiler())
    known = SOURCE_UNITS.get(id(typed_unit))
    if known is not None and known[0] is typed_unit:
        unit = known[1].copy(target=target)
    else:
        unit = _retargeted(typed_unit, target)
    for _ in range(len(unit.callables_table) + 1):
        callees = [name for name, clbl in unit.callables_table.items()
                   if isinstance(clbl, CallableKernel) and name != entrypoint]
        if not callees:
            break
        for name in callees:
            if name in unit.callables_table:
                unit = lp.inline_callable_kernel(unit, name)
    for name, clbl in list(unit.callables_table.items()):
        if isinstance(clbl, CallableKernel):
            unit = unit.with_kernel(_for_plain_c(clbl.subkernel))
    return unit


class HostKernel:
    """The compiled C function of one call's kernel, called through
    :mod:`ctypes` with its arguments in the order of its declaration
    (loopy's own C executor passes all kernel arguments in kernel order,
    which does not match a function taking only those it uses)."""

    def __init__(self, call: LoopyCall) -> None:
        import ctypes

        import cgen

        import loopy as lp
        unit = c_translation_unit(call.translation_unit, call.entrypoint)
        code = lp.generate_code_v2(unit)
        programs = [dp for dp in code.device_programs
                    if dp.name == call.entrypoint] or code.device_programs
        if len(programs) != 1:
            raise UnsupportedArrayError(
                f"the NumPy target cannot run the loopy kernel "
                f"'{call.entrypoint}': loopy's C target made "
                f"{len(code.device_programs)} functions of it")
        program, = programs
        self.name = program.name
        self.kernel = unit[call.entrypoint]
        # (a unit retargeted kernel by kernel keeps OpenCL's math
        # functions, which loopy's C target does not include a header for)
        self.source = "#include <math.h>\n" + code.device_code()

        def declaration(node: object) -> cgen.FunctionDeclaration | None:
            if isinstance(node, cgen.FunctionBody):
                decl: cgen.Declarator = node.fdecl
                while not isinstance(decl, cgen.FunctionDeclaration):
                    # (declarators around the function's: const, pointer)
                    decl = cast("cgen.NestedDeclarator", decl).subdecl
                return decl if decl.name == self.name else None
            for child in getattr(node, "contents", ()):
                found = declaration(child)
                if found is not None:
                    return found
            return None

        decl = declaration(program.ast)
        if decl is None:
            raise UnsupportedArrayError(
                f"the NumPy target cannot run the loopy kernel "
                f"'{call.entrypoint}': no function '{self.name}' in the C "
                "code loopy made")
        # (each argument's declarator names it)
        self.arg_names = [cast("cgen.NestedDeclarator", d).name
                          for d in decl.arg_decls]
        unknown = [n for n in self.arg_names if n not in self.kernel.arg_dict]
        if unknown:
            raise UnsupportedArrayError(
                f"the NumPy target cannot run the loopy kernel "
                f"'{call.entrypoint}': its C function takes {unknown}, which "
                "are not kernel arguments (global temporaries or automatic "
                "strides)")
        argtypes: list[type] = []
        for name in self.arg_names:
            arg = self.kernel.arg_dict[name]
            if isinstance(arg, lp.ValueArg):
                argtypes.append(np.ctypeslib.as_ctypes_type(
                    _numpy_dtype(arg.dtype)))
            else:
                argtypes.append(ctypes.c_void_p)
        compiler = _compiler()
        with _quiet_toolchain():
            library = compiler.build(self.name, self.source)
        self.function = getattr(library, self.name)
        self.function.restype = None
        self.function.argtypes = argtypes

    def __call__(self, call: LoopyCall, values: Mapping[str, object]
                 ) -> dict[str, np.ndarray]:
        from pymbolic import evaluate

        import loopy as lp
        arg_dict = self.kernel.arg_dict
        sizes: dict[str, np.generic] = {}
        arrays: dict[str, np.ndarray] = {}
        for name, value in {**call.scalar_bindings, **values}.items():
            arg = arg_dict[name]
            if isinstance(arg, lp.ValueArg):
                sizes[name] = _numpy_dtype(arg.dtype).type(np.asarray(value)[()])
            else:
                arrays[name] = np.asarray(value, dtype=_numpy_dtype(arg.dtype))
        for name, value in arrays.items():
            arrays[name] = _laid_out(value, arg_dict[name], sizes,
                                     call.entrypoint)
        outputs = {}
        for name in call.output_names:
            arg = arg_dict[name]
            shape = tuple(int(evaluate(d, sizes)) for d in arg.shape)
            out = _allocate(shape, _numpy_dtype(arg.dtype), arg, sizes,
                            call.entrypoint)
            arrays[name] = outputs[name] = out
        c_args = [arrays[n].ctypes.data if n in arrays else sizes[n]
                  for n in self.arg_names]
        self.function(*c_args)
        return outputs


def _numpy_dtype(lp_dtype: LoopyType | None) -> np.dtype:
    # (None, an argument's unset dtype, reads as NumPy's default, float64)
    return np.dtype(None) if lp_dtype is None else lp_dtype.numpy_dtype


def _strides(arg: KernelArgument, shape: tuple[int, ...], itemsize: int,
             sizes: Mapping[str, np.generic]) -> tuple[int, ...] | None:
    """The byte strides *arg*'s dim tags give (``None`` if they are not
    fixed strides)."""
    from pymbolic import evaluate

    from loopy.kernel.array import FixedStrideArrayDimTag
    tags = getattr(arg, "dim_tags", None)
    if tags is None or len(tags) != len(shape):
        return None
    strides = []
    for tag in tags:
        if not isinstance(tag, FixedStrideArrayDimTag):
            return None
        strides.append(int(evaluate(tag.stride, sizes)) * itemsize)
    return tuple(strides)


def _fits(value: np.ndarray, strides: tuple[int, ...] | None) -> bool:
    return strides is None or all(
        n <= 1 or s == t for n, s, t in zip(value.shape, value.strides, strides,
                                           strict=True))


def _laid_out(value: np.ndarray, arg: KernelArgument,
              sizes: Mapping[str, np.generic],
              entrypoint: str) -> np.ndarray:
    """*value* with the strides the kernel declares for *arg* (a C- or
    Fortran-ordered copy when needed)."""
    strides = _strides(arg, value.shape, value.itemsize, sizes)
    if _fits(value, strides):
        return value
    for candidate in (np.ascontiguousarray(value), np.asfortranarray(value)):
        if _fits(candidate, strides):
            return candidate
    raise UnsupportedArrayError(
        f"the NumPy target cannot lay out argument '{arg.name}' of loopy "
        f"kernel '{entrypoint}' with the strides {strides} the kernel "
        "declares")


def _allocate(shape: tuple[int, ...], dtype: np.dtype, arg: KernelArgument,
              sizes: Mapping[str, np.generic], entrypoint: str) -> np.ndarray:
    strides = _strides(arg, shape, dtype.itemsize, sizes)
    for order in ("C", "F"):
        out = np.empty(shape, dtype, order=order)
        if _fits(out, strides):
            return out
    raise UnsupportedArrayError(
        f"the NumPy target cannot allocate output '{arg.name}' of loopy "
        f"kernel '{entrypoint}' with the strides {strides} the kernel "
        "declares")


_COMPILER: CCompiler | None = None


@contextlib.contextmanager
def _quiet_toolchain() -> Iterator[None]:
    """Silences the deprecation warning codepy's toolchain gives loopy's
    compiler (its ``copy``), which is not the user's to act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning,
                                message=".*GCCToolchain.copy.*")
        yield


def _compiler() -> CCompiler:
    """One loopy C compiler per process (each makes a build directory,
    removed at exit)."""
    global _COMPILER
    if _COMPILER is None:
        import atexit
        import shutil

        from loopy.target.c.c_execution import CCompiler
        with _quiet_toolchain():
            _COMPILER = CCompiler()
        atexit.register(shutil.rmtree, _COMPILER.tempdir, True)
    return _COMPILER


def _host_kernel(call: LoopyCall) -> HostKernel:
    key = (id(call.translation_unit), call.entrypoint)
    with _LOCK:
        hit = _EXECUTORS.get(key)
        if hit is not None and hit[0] is call.translation_unit:
            return hit[1]
    try:
        kernel = HostKernel(call)
    except UnsupportedArrayError:
        raise
    except Exception as exc:
        raise UnsupportedArrayError(
            f"the NumPy target cannot run the loopy kernel "
            f"'{call.entrypoint}' through loopy's C target: "
            f"{type(exc).__name__}: {exc or 'not supported there'}") from exc
    with _LOCK:
        if len(_EXECUTORS) >= _MAX_EXECUTORS:
            _EXECUTORS.pop(next(iter(_EXECUTORS)))
        _EXECUTORS[key] = (call.translation_unit, kernel)
    return kernel


def run_loopy_call_on_host(call: LoopyCall, values: Mapping[str, object]
                           ) -> dict[str, np.ndarray]:
    """Run the kernel of the :class:`~pytato_like.loopy.LoopyCall` *call*
    on the host with *values* (binding name -> NumPy value); its outputs by
    name."""
    return _host_kernel(call)(call, values)
