"""The loopy kernel of :class:`~pytato_like.sparse.CSRMatmul`: one
work-item per row, each looping over its own entries (a data-dependent loop
bound loopy expresses as a domain whose parameter an instruction computes).

The kernel depends only on the dtypes and on whether the dense operand is
1-D or 2-D (sizes are kernel parameters), so all products of one signature
in a process share one compiled kernel.

.. autoclass:: CSRMatmulRunner
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from pytato_like.sparse import CSRMatmul
from pytato_like.target.loopy.outlined_kinds import OutlinedKind, register_outlined

if TYPE_CHECKING:
    import loopy as lp
    import pyopencl as cl
    import pyopencl.array as cla
    from pyopencl.typing import Allocator, WaitList

__all__ = ["CSRMatmulRunner"]

#: work-items per work-group of the row loop
ROWS_PER_GROUP = 64

_KERNELS: dict[tuple, lp.TranslationUnit] = {}


def _storage(dtype: np.dtype) -> np.dtype:
    # booleans live as bytes on the device
    return np.dtype(np.int8) if dtype == np.bool_ else np.dtype(dtype)


def _make_kernel(value_dtype: np.dtype, col_dtype: np.dtype,
                 start_dtype: np.dtype, array_dtype: np.dtype, array_ndim: int,
                 out_dtype: np.dtype) -> lp.TranslationUnit:
    import loopy as lp
    two_d = array_ndim == 2
    domains = ["{[i]: 0 <= i < nrows}"
               if not two_d else "{[i, c]: 0 <= i < nrows and 0 <= c < ncomp}",
               "{[jj]: 0 <= jj < rowlen}"]
    x_ref = ("x[col_indices[rowstart + jj], c]" if two_d
             else "x[col_indices[rowstart + jj]]")
    out_ref = "out[i, c]" if two_d else "out[i]"
    body = f"""
        for i
            <> rowstart = row_starts[i]
            <> rowlen = row_starts[i + 1] - rowstart
            {"for c" if two_d else ""}
            {out_ref} = sum(jj, values[rowstart + jj] * {x_ref}) {{id=prod}}
            {"end" if two_d else ""}
        end
        """
    x_shape = ("ncols", "ncomp") if two_d else ("ncols",)
    out_shape = ("nrows", "ncomp") if two_d else ("nrows",)
    args: list[lp.ArrayArg | lp.ValueArg] = [
        lp.GlobalArg("values", value_dtype, shape=("nnz",)),
        lp.GlobalArg("col_indices", col_dtype, shape=("nnz",)),
        lp.GlobalArg("row_starts", start_dtype, shape=("nrows + 1",)),
        lp.GlobalArg("x", array_dtype, shape=x_shape),
        lp.GlobalArg("out", out_dtype, shape=out_shape, is_output=True),
        lp.ValueArg("nrows", np.int64), lp.ValueArg("ncols", np.int64),
        lp.ValueArg("nnz", np.int64),
    ]
    if two_d:
        args.append(lp.ValueArg("ncomp", np.int64))
    knl = lp.make_kernel(domains, body, args, name="csr_matmul",
                         lang_version=(2018, 2))
    knl = lp.split_iname(knl, "i", ROWS_PER_GROUP, outer_tag="g.0",
                         inner_tag="l.0")
    return knl


class CSRMatmulRunner:
    """Computes :class:`~pytato_like.sparse.CSRMatmul` nodes of one dtype
    signature (called like a bound program; the one result is ``"out"``)."""

    def __init__(self, node: CSRMatmul) -> None:
        key = _signature(node)
        self.signature = key
        self.out_dtype = node.dtype
        if key not in _KERNELS:
            _KERNELS[key] = _make_kernel(*key)
        self.kernel = _KERNELS[key]
        self._executors: dict[cl.Context, lp.ExecutorBase] = {}

    def result_names(self, node: CSRMatmul) -> list[str]:
        return ["out"]

    @property
    def source(self) -> str:
        import loopy as lp
        return lp.generate_code_v2(self.kernel).device_code()

    def _outputs_on_host(self, kwargs: Mapping[str, object]) -> bool:
        return True   # holds no data of its own

    def __call__(self, queue: cl.CommandQueue, *,
                 allocator: Allocator | None = None,
                 wait_for: WaitList = None, out_host: bool = False,
                 values: cla.Array, col_indices: cla.Array,
                 row_starts: cla.Array, x: cla.Array
                 ) -> tuple[cl.Event | None, dict[str, object]]:
        import pyopencl.array as cla
        executor = self._executors.get(queue.context)
        if executor is None:
            executor = self._executors[queue.context] = \
                self.kernel.executor(queue.context)
        nrows = row_starts.shape[0] - 1
        out_shape = (nrows, *x.shape[1:])
        out = cla.empty(queue, out_shape, _storage(self.out_dtype),
                        allocator=allocator)
        sizes = {"nrows": nrows, "ncols": x.shape[0],
                 "nnz": values.shape[0]}
        if x.ndim == 2:
            sizes["ncomp"] = x.shape[1]
        if out.size:
            evt, _ = executor(queue, values=values, col_indices=col_indices,
                              row_starts=row_starts, x=x, out=out,
                              wait_for=wait_for, **sizes)
        else:
            evt = None
        if out_host:
            return evt, {"out": out.get(queue=queue)}
        return evt, {"out": out}


def _signature(node: CSRMatmul) -> tuple:
    return (_storage(node.elem_values.dtype),
            _storage(node.elem_col_indices.dtype),
            _storage(node.row_starts.dtype), _storage(node.array.dtype),
            node.array.ndim, _storage(node.dtype))


register_outlined(CSRMatmul, OutlinedKind(
    arguments=lambda node: {"values": node.elem_values,
                            "col_indices": node.elem_col_indices,
                            "row_starts": node.row_starts, "x": node.array},
    runner=lambda node, compile_dag: CSRMatmulRunner(node),
    runner_key=lambda node: ("csr_matmul", *_signature(node))),
    {CSRMatmul: lambda node: (node, "out")})
