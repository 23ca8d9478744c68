"""Running hand-written loopy kernels (:func:`pytato_like.loopy.call_loopy`)
inside a program of the loopy target.

A :class:`~pytato_like.loopy.LoopyCall` is an outlined node
(:mod:`pytato_like.target.loopy.outlined`): its array bindings are computed
by the generated program of its stage, then the user's translation unit runs
through loopy's own executor (cached per context), with the bound numbers
as value arguments (a value argument bound to a 0-d array of the DAG is
read back from the device first); its outputs stay on the device for the
next stage.

.. autoclass:: LoopyCallRunner
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from pytato_like.loopy import LoopyCall, LoopyCallResult, kernel_arg_dtype
from pytato_like.target.loopy.outlined_kinds import OutlinedKind, register_outlined

if TYPE_CHECKING:
    import loopy as lp
    import pyopencl as cl
    from pyopencl.typing import Allocator, WaitList

__all__ = ["LoopyCallRunner"]


class LoopyCallRunner:
    """Runs the kernel of one :class:`~pytato_like.loopy.LoopyCall` (called
    like a bound program; results by output argument name)."""

    def __init__(self, call: LoopyCall) -> None:
        import loopy as lp
        self.translation_unit = lp.set_options(call.translation_unit,
                                               return_dict=True)
        self.entrypoint = call.entrypoint
        self.scalars = dict(call.scalar_bindings)
        # value arguments bound to 0-d arrays of the DAG: read from the
        # device when the kernel runs, as the kernel's dtype
        arg_dict = call.entry_kernel.arg_dict
        self.value_dtypes = {
            name: kernel_arg_dtype(arg_dict[name].dtype)
            for name in call.value_array_names}
        self._executors: dict[cl.Context, lp.ExecutorBase] = {}

    def result_names(self, call: LoopyCall) -> list[str]:
        return call.output_names

    @property
    def source(self) -> str:
        import loopy as lp
        return lp.generate_code_v2(
            self.translation_unit.with_entrypoints(self.entrypoint)).device_code()

    def _outputs_on_host(self, kwargs: Mapping[str, object]) -> bool:
        return True   # holds no data of its own

    def __call__(self, queue: cl.CommandQueue, *,
                 allocator: Allocator | None = None,
                 wait_for: WaitList = None, out_host: bool = False,
                 **arrays: object) -> tuple[cl.Event | None, dict[str, object]]:
        executor = self._executors.get(queue.context)
        if executor is None:
            executor = self._executors[queue.context] = \
                self.translation_unit.executor(queue.context,
                                               entrypoint=self.entrypoint)
        for name, dtype in self.value_dtypes.items():
            value = arrays[name]
            if hasattr(value, "get"):
                value = value.get(queue=queue)
            arrays[name] = dtype.type(np.asarray(value)[()])
        evt, outs = executor(queue, allocator=allocator, wait_for=wait_for,
                             out_host=out_host, **arrays, **self.scalars)
        return evt, dict(outs)


def _runner_key(call: LoopyCall) -> tuple:
    return ("loopy_call", id(call.translation_unit), call.entrypoint,
            tuple(sorted(call.scalar_bindings.items())))


register_outlined(LoopyCall, OutlinedKind(
    arguments=lambda call: dict(call.bindings),
    runner=lambda call, compile_dag: LoopyCallRunner(call),
    runner_key=_runner_key),
    {LoopyCallResult: lambda node: (node._container, node.name)})
