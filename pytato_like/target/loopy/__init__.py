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

``prg.source`` shows the OpenCL C, ``prg.program`` the loopy translation
unit, ``prg.stats`` compile and launch times (:mod:`.report`).
``evt, (out,) = prg(queue, x=...)`` runs it (loopy's calling convention,
see :class:`~pytato_like.target.loopy.bound.BoundPyOpenCLProgram`).

.. autofunction:: generate_loopy
.. autoclass:: LoopyTarget
.. autoclass:: LoopyPyOpenCLTarget
.. autoclass:: ImplSubstitution
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyopencl as cl

    from pytato_like.array import Array, DictOfNamedArrays
    from pytato_like.target.loopy.outlined import OutlinedProgram

from pytato_like.target import (
    BoundProgram,
    Target,
    gather_program_inputs,
    normalize_outputs,
)
from pytato_like.target.loopy.bound import (
    BoundPyOpenCLExecutable,
    BoundPyOpenCLProgram,
    LoopyBoundProgram,
)
from pytato_like.tags import ImplementationStrategy, ImplInlined, ImplStored
from pytato_like.target.loopy.report import ProgramStats, compiling, report_enabled
from pytato_like.target.loopy.report import logger as report_logger

__all__ = ["BoundProgram", "BoundPyOpenCLExecutable", "BoundPyOpenCLProgram",
           "ImplInlined", "ImplStored", "ImplSubstitution",
           "ImplementationStrategy", "LoopyBoundProgram", "LoopyPyOpenCLTarget",
           "LoopyTarget", "generate_loopy"]


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


_KEYED_OPTIONS = ("cost_model", "max_instructions_per_kernel",
                  "sizes_as_arguments", "time_tile", "small_chunk_elements")
#: keys of the dict form of *options* that are ours, not loopy's
_OWN_OPTIONS = ("report", "runtime_checks", *_KEYED_OPTIONS)


def _loopy_option_names() -> frozenset[str]:
    import loopy as lp
    return frozenset(k for k in vars(lp.Options()) if not k.startswith("_"))


def _as_dict_result_options(options):
    """*options* (as given to :func:`generate_loopy`) for compiling the
    pieces of a program with calls, whose results are dicts."""
    import loopy as lp
    if isinstance(options, lp.Options):
        return options.copy(return_dict=True)
    if isinstance(options, dict) and "return_dict" in options:
        return {**options, "return_dict": True}
    return options


def _split_options(options, result_is_dict: bool):
    """``(our options dict, loopy.Options)`` for the *options* argument of
    :func:`generate_loopy`: a :class:`loopy.Options`, None, or a dict of
    our keys and loopy option names. Raises :class:`ValueError` (as pytato
    does) when ``return_dict`` does not match the kind of result.

    With no loopy option (None, or a dict of our keys only) the second
    item is None and loopy is not imported: a warm start (a cache hit)
    never needs it, and its import costs ~0.2 s. The program makes the
    default ``loopy.Options`` when its translation unit is asked for."""
    if options is None or (isinstance(options, dict)
                           and set(options) <= set(_OWN_OPTIONS)):
        return dict(options or {}), None
    import loopy as lp

    from pytato_like.diagnostic import ConfigurationError
    ours: dict[str, Any] = {}
    if isinstance(options, lp.Options):
        lp_options = options
    elif isinstance(options, dict):
        loopy_names = _loopy_option_names()
        lp_kwargs: dict[str, Any] = {"return_dict": result_is_dict}
        for key, value in options.items():
            if key in _OWN_OPTIONS:
                ours[key] = value
            elif key in loopy_names:
                lp_kwargs[key] = value
            else:
                raise ConfigurationError(
                    f"generate_loopy: unknown option '{key}'; known are "
                    f"{sorted(_OWN_OPTIONS)} and loopy's "
                    f"{sorted(loopy_names)}")
        lp_options = lp.Options(**lp_kwargs)
    else:
        raise TypeError(f"generate_loopy: options must be a loopy.Options, "
                        f"a dict or None, not {type(options).__name__}")
    if bool(lp_options.return_dict) != result_is_dict:
        raise ValueError(
            f"generate_loopy: options.return_dict={lp_options.return_dict} "
            f"does not match the result, "
            f"{'a dict of arrays' if result_is_dict else 'a single array'}")
    return ours, lp_options


def _check_tag_types(keyword: str, value) -> None:
    from pytools.tag import Tag

    from pytato_like.diagnostic import ConfigurationError
    try:
        items = list(value)
    except TypeError:
        items = [value]
    bad = [t for t in items if not (isinstance(t, type) and issubclass(t, Tag))]
    if bad:
        raise ConfigurationError(
            f"generate_loopy: {keyword} must be a collection of Tag "
            f"subclasses; got {bad!r}")


def generate_loopy(result: Array | DictOfNamedArrays | dict[str, Array],
                   target: LoopyTarget | None = None,
                   options: Any = None, *,
                   function_name: str = "_pt_kernel",
                   cl_device: cl.Device | None = None,
                   array_tag_t_to_not_propagate: frozenset[type] | None = None,
                   axis_tag_t_to_not_propagate: frozenset[type] = frozenset(),
                   ) -> BoundPyOpenCLProgram | OutlinedProgram:
    """Compile *result* (an :class:`~pytato_like.Array`, a
    :class:`~pytato_like.DictOfNamedArrays` or a dict of arrays) to OpenCL.

    :arg options: a :class:`loopy.Options`, None, or a dict. The dict may
        hold loopy option names and our own keys: ``"report"`` (bool) prints
        compile and launch times, ``"cost_model"`` (a
        :class:`~pytato_like.transform.materialize_cost.CostModel`),
        ``"max_instructions_per_kernel"``, ``"sizes_as_arguments"``,
        ``"time_tile"`` (elements per tile of fused stencil steps, 0 for
        none: :mod:`~pytato_like.target.loopy.time_tiles`) and
        ``"small_chunk_elements"`` (most elements of small kernels merged
        into one, 0 for none: :mod:`~pytato_like.target.loopy.chunks`)
        tune code generation; any other
        key raises :class:`~pytato_like.diagnostic.ConfigurationError`.
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
    from pytato_like._traversal import topological_order
    from pytato_like.target.loopy import cache
    from pytato_like.target.loopy.codegen import build_plan

    t_start = time.perf_counter()
    if array_tag_t_to_not_propagate is None:
        from pytato_like.target.loopy.unit import DEFAULT_ARRAY_TAGS_NOT_PROPAGATED
        array_tag_t_to_not_propagate = DEFAULT_ARRAY_TAGS_NOT_PROPAGATED
    _check_tag_types("array_tag_t_to_not_propagate", array_tag_t_to_not_propagate)
    _check_tag_types("axis_tag_t_to_not_propagate", axis_tag_t_to_not_propagate)
    outputs, single = normalize_outputs(result)
    options_arg = options
    options, lp_options = _split_options(options, not single)
    options["function_name"] = function_name
    # (for the translation unit handed out: which tags it copies)
    options["_unit_tag_filters"] = (frozenset(array_tag_t_to_not_propagate),
                                    frozenset(axis_tag_t_to_not_propagate))
    if target is None:
        target = LoopyPyOpenCLTarget(cl_device)
    if not isinstance(target, LoopyPyOpenCLTarget):
        from pytato_like.diagnostic import PytatoLikeError
        raise PytatoLikeError(f"generate_loopy cannot generate code for target "
                              f"{target!r}")
    device = cl_device if cl_device is not None else target.device
    order = topological_order(list(outputs.values()))
    inputs = gather_program_inputs(order)
    from pytato_like.target.loopy.outlined import (
        generate_outlined_program,
        has_outlined_nodes,
    )
    if has_outlined_nodes(order):
        sub_options = _as_dict_result_options(options_arg)

        def compile_dag(arrays):
            return generate_loopy(arrays, target, sub_options,
                                  function_name=function_name, cl_device=cl_device)
        outlined = generate_outlined_program(outputs, order, single, inputs,
                                             compile_dag, target)

        def unit_program():
            from pytato_like.array import make_dict_of_named_arrays
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
    from pytato_like.transform.signed_indices import store_unsigned_indices
    signed = store_unsigned_indices(outputs, order)
    if signed is not outputs:
        outputs = signed
        order = topological_order(list(outputs.values()))
    checks: list = []
    if options.get("runtime_checks", True):
        # out-of-range gathers and negative integer powers raise as in NumPy
        from pytato_like.transform.runtime_checks import add_runtime_checks
        outputs, checks = add_runtime_checks(outputs, order)
        if checks:
            order = topological_order(list(outputs.values()))
    # full reductions of large arrays run in two parallel stages
    from pytato_like.transform.split_reductions import split_full_reductions
    split = split_full_reductions(outputs, order)
    if split is not outputs:
        outputs = split
        order = topological_order(list(outputs.values()))
    stats = ProgramStats(enabled=report_enabled(options), n_nodes=len(order))
    from pytato_like.target.loopy import schedule
    extra = repr((function_name, sorted((k, repr(options.get(k)))
                                        for k in _KEYED_OPTIONS),
                  getattr(device, "name", None), schedule.parameters()))
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
    prg = BoundPyOpenCLProgram(plan, inputs, list(inputs.data_wrappers), single,
                               outputs, options, stats, target=target,
                               loopy_options=lp_options, checks=checks)
    prg.key = key
    if translation_units is not None:
        prg._translation_units = translation_units
    if stats.enabled:
        report_logger.info("%scompiled (%s):\n%s", stats.where,
                           function_name, stats.table())
    return prg
