"""The loopy/OpenCL target: fused, automatically materialised, parallel
kernels with a persistent compile cache.

:func:`generate_loopy` turns a DAG into a
:class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`:

1. look the DAG's structural key up in the cache
   (:mod:`pytato_like.target.loopy.cache`);
2. on a miss, build a plan (:mod:`.codegen`): cost-model materialisation
   (:mod:`pytato_like.transform.materialize_cost`), lowering
   (:mod:`.lowering`, :mod:`.functions`), default parallel schedule
   (:mod:`.schedule`), loopy code generation;
3. bind it (:mod:`.bound`): the kernels are built at the first call, in
   one OpenCL program per context (PoCL's own cache makes a rebuild in a
   later process cheap).

Its options are one
:class:`~pytato_like.target.loopy.options.CodegenOptions` (also exported
here). ``prg.source`` shows the OpenCL C, ``prg.program`` the loopy translation
unit, ``prg.stats`` compile and launch times (:mod:`.report`).
``evt, (out,) = prg(queue, x=...)`` runs it (loopy's calling convention,
see :class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`).

.. autofunction:: generate_loopy
.. autoclass:: LoopyTarget
.. autoclass:: LoopyPyOpenCLTarget
.. autoclass:: ImplSubstitution
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import loopy as lp
    import pyopencl as cl

    from pytato_like.array import Array, DictOfNamedArrays
    from pytato_like.target.loopy.outlined import OutlinedProgram

from pytato_like import _pocl_cache
from pytato_like._traversal import topological_order
from pytato_like.array import make_dict_of_named_arrays
from pytato_like.diagnostic import ConfigurationError, PytatoLikeError
from pytato_like.collector import paused_collection
from pytato_like.target import (
    BoundProgram,
    Target,
    gather_program_inputs,
    normalize_outputs,
)
from pytato_like.target.loopy import cache
from pytato_like.target.loopy.bound import (
    BoundPyOpenCLExecutable,
    BoundPyOpenCLProgram,
    LoopyBoundProgram,
)
from pytato_like.target.loopy import host_first_call
from pytato_like.target.loopy.options import CodegenOptions
from pytato_like.tags import (
    ImplementationStrategy,
    ImplInlined,
    ImplStored,
    Named,
    PrefixNamed,
)
from pytato_like.target.loopy.outlined_kinds import has_outlined_nodes
from pytato_like.target.loopy.pocl_warmup import start_compiler_warmup
from pytato_like.target.loopy.report import ProgramStats, compiling, report_enabled
from pytato_like.target.loopy.report import logger as report_logger
from pytato_like.transform.runtime_checks import add_runtime_checks
from pytato_like.transform.signed_indices import store_unsigned_indices
from pytato_like.transform.split_reductions import split_full_reductions

__all__ = ["BoundProgram", "BoundPyOpenCLExecutable", "BoundPyOpenCLProgram",
           "CodegenOptions", "ImplInlined", "ImplStored", "ImplSubstitution",
           "ImplementationStrategy", "LoopyBoundProgram", "LoopyPyOpenCLTarget",
           "LoopyTarget", "generate_loopy"]


#: the array tag types pytato does not copy onto loopy variables by default
DEFAULT_ARRAY_TAGS_NOT_PROPAGATED: frozenset[type] = frozenset(
    [ImplStored, Named, PrefixNamed])


class ImplSubstitution(ImplementationStrategy):
    """Implementation strategy: the array is computed where it is used, as
    a loopy substitution rule would be (pytato's tag). Code generation
    treats it as :class:`~pytato_like.tags.ImplInlined`: not stored."""


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


def _as_dict_result_options(options):
    """*options* (as given to :func:`generate_loopy`) for compiling the
    pieces of a program with calls, whose results are dicts."""
    import loopy as lp
    if isinstance(options, lp.Options):
        return options.copy(return_dict=True)
    if isinstance(options, dict) and "return_dict" in options:
        return {**options, "return_dict": True}
    if (isinstance(options, CodegenOptions)
            and "return_dict" in options.loopy_options):
        return dataclasses.replace(options, loopy_options={
            **options.loopy_options, "return_dict": True})
    return options


def _loopy_options(given: object, options: CodegenOptions, result_is_dict: bool):
    """The :class:`loopy.Options` of a :func:`generate_loopy` call whose
    *options* argument was *given*: *given* itself when it is one, else
    made of the loopy option names *options* holds. Raises
    :class:`ValueError` (as pytato does) when ``return_dict`` does not
    match the kind of result.

    With no loopy option the result is None and loopy is not imported: a
    warm start (a cache hit) never needs it, and its import costs ~0.2 s.
    The program makes the default ``loopy.Options`` when its translation
    unit is asked for."""
    if not options.loopy_options and (given is None or isinstance(
            given, (dict, CodegenOptions))):
        return None
    import loopy as lp
    if isinstance(given, lp.Options):
        lp_options = given
    else:
        lp_options = lp.Options(**{"return_dict": result_is_dict,
                                   **options.loopy_options})
    if bool(lp_options.return_dict) != result_is_dict:
        raise ValueError(
            f"generate_loopy: options.return_dict={lp_options.return_dict} "
            f"does not match the result, "
            f"{'a dict of arrays' if result_is_dict else 'a single array'}")
    return lp_options


def _codegen_options(given: object, function_name: str,
                     array_tags: frozenset, axis_tags: frozenset
                     ) -> CodegenOptions:
    """The :class:`~pytato_like.target.loopy.options.CodegenOptions` of a
    :func:`generate_loopy` call (see its *options*)."""
    if not (given is None or isinstance(given, (dict, CodegenOptions))):
        import loopy as lp
        if not isinstance(given, lp.Options):
            raise TypeError(
                f"generate_loopy: options must be a loopy.Options, a "
                f"CodegenOptions, a dict or None, not {type(given).__name__}")
    return CodegenOptions.from_user(given, function_name=function_name,
                                    array_tags_not_propagated=array_tags,
                                    axis_tags_not_propagated=axis_tags)


def _check_tag_types(keyword: str, value) -> None:
    from pytools.tag import Tag

    try:
        items = list(value)
    except TypeError:
        items = [value]
    bad = [t for t in items if not (isinstance(t, type) and issubclass(t, Tag))]
    if bad:
        raise ConfigurationError(
            f"generate_loopy: {keyword} must be a collection of Tag "
            f"subclasses; got {bad!r}")


# (allocation-heavy: the collector's full collections walk the whole DAG)
@paused_collection
def generate_loopy(result: Array | DictOfNamedArrays | dict[str, Array],
                   target: LoopyTarget | None = None,
                   options: CodegenOptions | dict | lp.Options | None = None, *,
                   function_name: str = "_pt_kernel",
                   cl_device: cl.Device | None = None,
                   array_tag_t_to_not_propagate: frozenset[type] | None = None,
                   axis_tag_t_to_not_propagate: frozenset[type] = frozenset(),
                   ) -> BoundPyOpenCLProgram | OutlinedProgram:
    """Compile *result* (an :class:`~pytato_like.Array`, a
    :class:`~pytato_like.DictOfNamedArrays` or a dict of arrays) to OpenCL.

    :arg options: a
        :class:`~pytato_like.target.loopy.options.CodegenOptions`, a
        :class:`loopy.Options`, None, or a dict. The dict may hold field
        names of :class:`~pytato_like.target.loopy.options.CodegenOptions`
        (``"report"``, ``"time_tile"``, ``"cost_model"``, ...: they tune
        code generation, see :doc:`/codegen`, "Options") and loopy option
        names; any other key raises
        :class:`~pytato_like.diagnostic.ConfigurationError`. Fields not
        given come from their ``PYTATO_LIKE_*`` environment variable,
        read at this call, else their default.
        ``return_dict`` must match the result (true for a dict of arrays):
        a mismatch raises :class:`ValueError`, as in pytato.
    :arg array_tag_t_to_not_propagate: array tag types not copied onto the
        variables of the translation unit handed out as ``.program``
        (pytato's default: :class:`~pytato_like.tags.ImplStored`,
        :class:`~pytato_like.tags.Named`, :class:`~pytato_like.tags.PrefixNamed`);
        every other array tag is.
    :arg axis_tag_t_to_not_propagate: axis tag types not copied onto the
        unit's inames (none by default). Our own kernels carry no tags.
    :returns: a :class:`BoundPyOpenCLProgram` (an
        :class:`~pytato_like.target.loopy.outlined.OutlinedProgram` when the
        DAG has calls kept outlined); ``prg(queue, **inputs)``
        gives ``(event, (out,))`` or ``(event, {name: out})``.
    """

    t_start = time.perf_counter()
    if array_tag_t_to_not_propagate is None:
        array_tag_t_to_not_propagate = DEFAULT_ARRAY_TAGS_NOT_PROPAGATED
    _check_tag_types("array_tag_t_to_not_propagate", array_tag_t_to_not_propagate)
    _check_tag_types("axis_tag_t_to_not_propagate", axis_tag_t_to_not_propagate)
    outputs, single = normalize_outputs(result)
    options_arg = options
    options = _codegen_options(options, function_name,
                               frozenset(array_tag_t_to_not_propagate),
                               frozenset(axis_tag_t_to_not_propagate))
    lp_options = _loopy_options(options_arg, options, not single)
    if target is None:
        target = LoopyPyOpenCLTarget(cl_device)
    if not isinstance(target, LoopyPyOpenCLTarget):
        raise PytatoLikeError(f"generate_loopy cannot generate code for target "
                              f"{target!r}")
    device = cl_device if cl_device is not None else target.device
    order = topological_order(list(outputs.values()))
    inputs = gather_program_inputs(order)
    if has_outlined_nodes(order):
        # (imported here: the runners of outlined nodes, and the modules
        # registering the package's own kinds, load for such DAGs only)
        import pytato_like.target.loopy.outlined as outlined_module
        sub_options = _as_dict_result_options(options_arg)

        def compile_dag(arrays):
            return generate_loopy(arrays, target, sub_options,
                                  function_name=function_name, cl_device=cl_device)
        outlined = outlined_module.generate_outlined_program(
            outputs, order, single, inputs, compile_dag, target)

        def unit_program():
            from pytato_like.transform.calls import (
                inline_calls,
                tag_all_calls_to_be_inlined,
            )
            dag = inline_calls(tag_all_calls_to_be_inlined(
                make_dict_of_named_arrays(dict(outputs))))
            inlined = {name: dag[name].expr for name in outputs}
            return BoundPyOpenCLProgram.unit_only(
                inlined, single, options, lp_options, target, function_name)
        outlined._make_unit_program = unit_program
        return outlined
    # uint64 gather indices are read as int64, as NumPy reads them (before
    # the checks, which then see the values NumPy checks)
    signed = store_unsigned_indices(outputs, order)
    if signed is not outputs:
        outputs = signed
        order = topological_order(list(outputs.values()))
    checks: list = []
    if options.runtime_checks:
        # out-of-range gathers and negative integer powers raise as in NumPy
        outputs, checks = add_runtime_checks(outputs, order)
        if checks:
            order = topological_order(list(outputs.values()))
    # full reductions of large arrays run in two parallel stages
    split = split_full_reductions(outputs, order)
    if split is not outputs:
        outputs = split
        order = topological_order(list(outputs.values()))
    stats = ProgramStats(enabled=report_enabled(options.report),
                         n_nodes=len(order))
    # (the options that change code are in the key: other options,
    # another plan)
    extra = repr((options.cache_key(), getattr(device, "name", None)))
    key = cache.dag_key(outputs, order, extra)
    stats.record_phase("cache_lookup", time.perf_counter() - t_start)
    plan, where = cache.get_plan(key)
    translation_units = None
    pending = host_first_call.pending_plan(key)
    if plan is None and pending is not None:
        # the same DAG, generated before in this process: its plan is
        # being made after a first call on the host
        plan, translation_units = pending.result()
        where = "memory"
    if plan is not None:
        stats.cache = where
        _record_plan(stats, plan, function_name)
    else:
        def make():
            return _make_plan(key, outputs, options, order, stats, device)
        seconds = _host_seconds(options, checks, order, inputs)
        if seconds is not None and host_first_call.reserve(seconds):
            plan = host_first_call.PendingPlan(key, make, reserved=seconds)
            # PoCL's compiler loads beside the host evaluation
            start_compiler_warmup(device)
        else:
            plan, translation_units = make()
    prg = BoundPyOpenCLProgram(plan, inputs, list(inputs.data_wrappers), single,
                               outputs, options, stats, target=target,
                               loopy_options=lp_options, checks=checks)
    prg.key = key
    if isinstance(plan, host_first_call.PendingPlan):
        # a program dropped before its first call gives its share back
        weakref.finalize(prg, plan.give_back)
    if translation_units is not None:
        prg._translation_units = translation_units
    return prg


def _host_seconds(options: CodegenOptions, checks: list, order: list,
                  inputs) -> float | None:
    """The estimated seconds of the first call on the host of a program
    whose plan missed the cache; None when that call compiles
    (:mod:`.host_first_call`)."""
    if not options.host_first_call or checks:
        return None
    import numpy as np
    if not all(isinstance(dw.data, np.ndarray) for dw in inputs.data_wrappers):
        return None   # (data bound on the device)
    return host_first_call.estimated_host_seconds(order)


def _make_plan(key: str, outputs, options: CodegenOptions, order: list,
               stats: ProgramStats, device):
    """``(plan, translation units or None)`` of a DAG whose plan missed
    the cache: another process's (waited for while it generates it) or
    generated here, and stored."""
    plan, where = None, "miss"
    claimed = cache.claim_plan(key)
    if claimed:
        # (another process may have stored it between the two looks)
        plan, where = cache.get_plan(key)
    elif cache.defer_claimed_plans():
        raise cache.PlanClaimedElsewhere(key)
    else:
        # another process generates this plan: wait for it
        plan, where = cache.wait_for_plan(key)
    stats.cache = where
    translation_units = None
    if plan is None:
        # PoCL loads its compiler at the first build, which waits for the
        # check of PoCL's folder: both start now, beside code generation
        # (a warm start loading saved binaries needs neither)
        start_compiler_warmup(device)
        _pocl_cache.start_background_check()
        # (imported on a miss only: a warm start does without the code
        # generator's ~20 modules)
        from pytato_like.target.loopy.codegen import build_plan
        try:
            with compiling(stats, f"{len(order)} nodes"):
                plan, translation_units = build_plan(outputs, options, order)
            for phase, t in plan.phase_times.items():
                stats.record_phase(phase, t)
            cache.put_plan(key, plan)
        finally:
            if claimed:
                cache.release_plan(key)
    elif claimed:
        cache.release_plan(key)
    _record_plan(stats, plan, options.function_name)
    return plan, translation_units


def _record_plan(stats: ProgramStats, plan, function_name: str) -> None:
    """The plan's figures in *stats* (and the report, when on)."""
    stats.n_stored = plan.n_stored
    stats.n_kernels = len(plan.kernels)
    stats.n_launches = len(plan.launches)
    if stats.enabled:
        report_logger.info("%scompiled (%s):\n%s", stats.where,
                           function_name, stats.table())
