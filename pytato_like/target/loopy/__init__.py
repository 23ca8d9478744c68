"""The loopy/OpenCL target: fused, automatically materialised, parallel
kernels with a persistent compile cache.

:func:`generate_loopy` turns a DAG into a :class:`LoopyBoundProgram`:

1. look the DAG's structural key up in the cache
   (:mod:`pytato_like.target.loopy.cache`);
2. on a miss, build a plan (:mod:`.codegen`): cost-model materialisation
   (:mod:`pytato_like.transform.materialize_cost`), lowering
   (:mod:`.lowering`, :mod:`.functions`), default parallel schedule
   (:mod:`.schedule`), loopy code generation;
3. bind it (:mod:`.bound`): the kernels are built at the first call, in
   one OpenCL program per context (PoCL's own cache makes a rebuild in a
   later process cheap).

``prg.source`` shows the OpenCL C, ``prg.program`` the loopy translation
unit, ``prg.stats`` compile and launch times (:mod:`.report`).

.. autofunction:: generate_loopy
.. autoclass:: LoopyPyOpenCLTarget
"""

from __future__ import annotations

import time
from typing import Any

from pytato_like.target import Target, gather_program_inputs, normalize_outputs
from pytato_like.target.loopy.bound import LoopyBoundProgram
from pytato_like.target.loopy.report import ProgramStats, compiling, report_enabled
from pytato_like.target.loopy.report import logger as report_logger

__all__ = ["LoopyBoundProgram", "LoopyPyOpenCLTarget", "LoopyTarget",
           "generate_loopy"]


class LoopyTarget(Target):
    """Base class of loopy-based targets."""


class LoopyPyOpenCLTarget(LoopyTarget):
    """OpenCL through loopy and pyopencl.

    :arg device: optional :class:`pyopencl.Device` the code is specialised
        for (part of the cache key).
    """

    def __init__(self, device=None) -> None:
        self.device = device

    def __repr__(self) -> str:
        return f"LoopyPyOpenCLTarget({getattr(self.device, 'name', None)!r})"


_KEYED_OPTIONS = ("cost_model", "max_instructions_per_kernel")


def generate_loopy(result, target: LoopyTarget | None = None,
                   options: dict[str, Any] | None = None, *,
                   function_name: str = "_pt_kernel",
                   cl_device=None) -> LoopyBoundProgram:
    """Compile *result* (an :class:`~pytato_like.Array`, a
    :class:`~pytato_like.DictOfNamedArrays` or a dict of arrays) to OpenCL.

    :arg options: a dict; ``"report"`` (bool) prints compile and launch
        times, ``"cost_model"`` (a
        :class:`~pytato_like.transform.materialize_cost.CostModel`) and
        ``"max_instructions_per_kernel"`` tune code generation.
    :returns: a :class:`LoopyBoundProgram`; ``prg(queue, **inputs)`` gives
        ``(event, outputs)``.
    """
    from pytato_like._traversal import topological_order
    from pytato_like.target.loopy import cache
    from pytato_like.target.loopy.codegen import build_plan

    t_start = time.perf_counter()
    options = dict(options or {})
    options["function_name"] = function_name
    if target is None:
        target = LoopyPyOpenCLTarget(cl_device)
    if not isinstance(target, LoopyPyOpenCLTarget):
        from pytato_like.diagnostic import PytatoLikeError
        raise PytatoLikeError(f"generate_loopy cannot generate code for target "
                              f"{target!r}")
    device = cl_device if cl_device is not None else target.device
    outputs, single = normalize_outputs(result)
    order = topological_order(list(outputs.values()))
    inputs = gather_program_inputs(order)
    stats = ProgramStats(enabled=report_enabled(options), n_nodes=len(order))
    from pytato_like.target.loopy import schedule
    extra = repr((function_name, sorted((k, repr(options.get(k)))
                                        for k in _KEYED_OPTIONS),
                  getattr(device, "name", None), schedule.WORK_GROUP_SIZE,
                  schedule.REDUCTION_ILP))
    key = cache.dag_key(outputs, order, extra)
    stats.record_phase("cache_lookup", time.perf_counter() - t_start)
    plan, where = cache.get_plan(key)
    stats.cache = where
    translation_units = None
    if plan is None:
        with compiling(stats, f"{len(order)} nodes"):
            plan, translation_units = build_plan(outputs, options)
        for phase, t in plan.phase_times.items():
            stats.record_phase(phase, t)
        cache.put_plan(key, plan)
    stats.n_stored = plan.n_stored
    stats.n_kernels = len(plan.kernels)
    stats.n_launches = len(plan.launches)
    prg = LoopyBoundProgram(plan, inputs, list(inputs.data_wrappers), single,
                            outputs, options, stats)
    prg.key = key
    if translation_units is not None:
        prg._translation_units = translation_units
    if stats.enabled:
        report_logger.info("%scompiled (%s):\n%s", stats.where,
                           function_name, stats.table())
    return prg
