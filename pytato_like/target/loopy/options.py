"""The options of OpenCL code generation: one frozen value,
:class:`CodegenOptions`, that every stage of
:func:`~pytato_like.target.loopy.generate_loopy` reads and that is part of
the compile cache key.

Where a value comes from, first match wins:

1. an option given to :func:`~pytato_like.target.loopy.generate_loopy`
   (its *options* dict, or a :class:`CodegenOptions`);
2. the field's ``PYTATO_LIKE_*`` environment variable, read when the
   options are built (:meth:`CodegenOptions.from_environment`; each call
   to ``generate_loopy`` builds them), never when a module is imported;
3. the field's default.

A malformed value raises :class:`~pytato_like.diagnostic.ConfigurationError`
naming the variable (or option) and the value.

A leaf module: it imports nothing of the package but
:mod:`pytato_like.diagnostic` (and loopy only to list loopy's own option
names, when a dict holds a key that is not ours).

.. autoclass:: CodegenOptions
    :members: from_environment, from_user, cache_key, environment_variables
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from constantdict import constantdict

from pytato_like._env import SWITCH_OFF, SWITCH_ON
from pytato_like.diagnostic import ConfigurationError

if TYPE_CHECKING:
    from pytato_like.transform.materialize_cost import CostModel

#: the kernel name when the caller gives none
DEFAULT_FUNCTION_NAME = "_pt_kernel"


#: the fields that change no code (not in :meth:`CodegenOptions.cache_key`)
_NOT_IN_KEY = frozenset({"report", "host_first_call"})

#: a checker of an option's values: ``check(label, value) -> value``
Checker = Callable[[str, object], object]
T = TypeVar("T")


def _integer(minimum: int) -> Callable[[str, object], int]:
    """A checker of an integer option of at least *minimum* (a text, as
    environment variables hold, is parsed first)."""
    def check(label: str, value: object) -> int:
        number = value
        if isinstance(value, str) and label.startswith("PYTATO_LIKE_"):
            try:
                number = int(value.strip())
            except ValueError:
                pass
        if (not isinstance(number, int) or isinstance(number, bool)
                or number < minimum):
            raise ConfigurationError(
                f"{label}={value!r} is not an integer >= {minimum}")
        return number
    return check


def _switch(label: str, value: object) -> bool:
    """A checker of an on/off option (texts as environment variables hold
    them: ``1``/``on``/``yes``/``true`` or ``0``/``off``/``no``/``false``)."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in SWITCH_ON:
            return True
        if text in SWITCH_OFF:
            return False
        raise ConfigurationError(
            f"{label}={value!r} is not a switch (expected one of "
            f"{sorted(SWITCH_ON)} or {sorted(SWITCH_OFF)})")
    return bool(value)


def _knob(default: T, variable: str | None, check: Checker | None,
          doc: str) -> T:
    """A field of :class:`CodegenOptions`: its default, the environment
    variable supplying another default (or None), the checker of its
    values and its documentation."""
    metadata = {"variable": variable, "check": check, "doc": doc}
    if isinstance(default, dict):
        # (an immutable mapping that subclasses dict: Python 3.10's
        # dataclasses refuse any dict as a default, so the one shared
        # instance comes from a factory)
        return dataclasses.field(default_factory=lambda: default,
                                 metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class CodegenOptions:
    """Every knob of code generation. Frozen and hashable: two programs
    compiled with equal options (and equal DAGs) share their plan and
    kernels in the cache (:meth:`cache_key`).

    Build with :meth:`from_environment` (defaults from ``PYTATO_LIKE_*``)
    or :meth:`from_user` (what :func:`~pytato_like.target.loopy.generate_loopy`
    accepts); change a field with :func:`dataclasses.replace`.
    """

    # {{{ the default schedule (schedule.py)

    #: work-items per work-group along the contiguous axis
    work_group_size: int = _knob(
        64, "PYTATO_LIKE_WORK_GROUP_SIZE", _integer(1),
        "work-items per work-group along the contiguous axis")
    #: elements of the contiguous axis each work-item of a group without
    #: reductions computes as one loop (0 or 1: one work-item per element)
    contiguous_run: int = _knob(
        4096, "PYTATO_LIKE_CONTIGUOUS_RUN", _integer(0),
        "elements of the contiguous axis one work-item loops over "
        "(0 or 1: one per element)")
    #: outputs per work-item along the second-to-last axis of reduction
    #: groups with a short contiguous axis
    reduction_ilp: int = _knob(
        4, "PYTATO_LIKE_REDUCTION_ILP", _integer(1),
        "outputs per work-item of a reduction with a short contiguous axis")
    #: register tile of outputs per work-item of matmul-like products: rows
    tile_rows: int = _knob(
        4, "PYTATO_LIKE_TILE_ROWS", _integer(1),
        "register tile rows per work-item of matmul-like products")
    #: ... and contiguous columns
    tile_cols: int = _knob(
        8, "PYTATO_LIKE_TILE_COLS", _integer(1),
        "register tile columns per work-item of matmul-like products")
    #: work-items per work-group along each axis of such a product
    tile_local: int = _knob(
        8, "PYTATO_LIKE_TILE_LOCAL", _integer(1),
        "work-items per work-group axis of matmul-like products")
    #: longest output axis of a small dense operator applied per batch
    #: element with one work-item per batch element
    small_operator_outputs: int = _knob(
        64, "PYTATO_LIKE_SMALL_OPERATOR_OUTPUTS", _integer(0),
        "longest output axis of the small-operator schedule")
    #: largest operand (elements) that schedule stages in local memory
    small_operator_staged: int = _knob(
        4096, "PYTATO_LIKE_SMALL_OPERATOR_STAGED", _integer(0),
        "largest operand (elements) the small-operator schedule stages")
    #: work-items (batch elements) per work-group in that schedule
    small_operator_local: int = _knob(
        128, "PYTATO_LIKE_SMALL_OPERATOR_LOCAL", _integer(1),
        "work-items per work-group of the small-operator schedule")
    #: fewest batch elements for that schedule
    small_operator_min_batch: int = _knob(
        256, "PYTATO_LIKE_SMALL_OPERATOR_MIN_BATCH", _integer(0),
        "fewest batch elements of the small-operator schedule")
    #: 64-bit index arithmetic in kernels of that schedule (LLVM then
    #: vectorises the per-element update of the outputs)
    small_operator_wide_indices: bool = _knob(
        True, "PYTATO_LIKE_SMALL_OPERATOR_WIDE_INDICES", _switch,
        "64-bit indices in kernels of the small-operator schedule")
    #: vector width (bytes) to which that schedule pads the accumulators
    #: of an element's outputs, with zero rows in the staged operator
    #: (0: no padding)
    small_operator_pad_bytes: int = _knob(
        32, "PYTATO_LIKE_SMALL_OPERATOR_PAD_BYTES", _integer(0),
        "vector width (bytes) the small-operator schedule pads an "
        "element's accumulators to (0: none)")
    #: fewest outputs per element for that padding (below, the kernel is
    #: bound by memory and the extra outputs were measured to cost)
    small_operator_pad_min_outputs: int = _knob(
        27, "PYTATO_LIKE_SMALL_OPERATOR_PAD_MIN_OUTPUTS", _integer(0),
        "fewest outputs per element the small-operator schedule pads")

    # }}}

    # {{{ kernels and chunks (chunks.py, instructions.py, time_tiles.py)

    #: most stored arrays (instructions) of one kernel
    max_instructions_per_kernel: int = _knob(
        128, None, _integer(1), "most stored arrays of one kernel")
    #: most expression nodes of one kernel
    max_kernel_operations: int = _knob(
        4096, "PYTATO_LIKE_MAX_KERNEL_OPERATIONS", _integer(1),
        "most expression nodes of one kernel")
    #: most distinct arrays one kernel reads
    max_kernel_reads: int = _knob(
        32, "PYTATO_LIKE_MAX_KERNEL_READS", _integer(1),
        "most distinct arrays one kernel reads")
    #: most elements of small kernels merged into one sequential kernel
    #: (0: no merging)
    small_chunk_elements: int = _knob(
        1024, "PYTATO_LIKE_SMALL_CHUNK_ELEMENTS", _integer(0),
        "most elements of small kernels merged into one (0: none)")
    #: fewest elements of a concatenation (or of an instruction reading
    #: one) written piece by piece
    pieces_min_size: int = _knob(
        1024, "PYTATO_LIKE_PIECES_MIN_SIZE", _integer(0),
        "fewest elements of an array written or read piece by piece")
    #: most pieces of such an array
    pieces_max: int = _knob(
        16, "PYTATO_LIKE_PIECES_MAX", _integer(1),
        "most pieces of an array written or read piece by piece")
    #: elements of the last step one work-item of a fused run of stencil
    #: steps computes (0: no fusion)
    time_tile: int = _knob(
        512, "PYTATO_LIKE_TIME_TILE", _integer(0),
        "elements per tile of fused stencil steps (0: no fusion)")
    #: most steps (chunks) fused into one kernel
    time_tile_stages: int = _knob(
        16, "PYTATO_LIKE_TIME_TILE_STAGES", _integer(1),
        "most stencil steps fused into one kernel")
    #: the alike middle steps of a fused run written as one loop over the
    #: steps (:mod:`~pytato_like.target.loopy.rolled_stages`)
    time_tile_roll: bool = _knob(
        True, "PYTATO_LIKE_TIME_TILE_ROLL", _switch,
        "alike middle steps of a fused run as one loop over the steps")
    #: fewest alike blocks (steps of a time loop) whose code is generated
    #: for a few of them and launched for all
    #: (:mod:`~pytato_like.target.loopy.repeated_steps`; 0: never; a
    #: value from 1 to 7 counts as 8)
    repeated_steps_min: int = _knob(
        256, "PYTATO_LIKE_REPEATED_STEPS_MIN", _integer(0),
        "fewest alike steps generated once and launched for all (0: never)")
    #: constant sizes and offsets of a kernel passed as arguments, so that
    #: kernels differing only in them are one kernel
    sizes_as_arguments: bool = _knob(
        True, None, _switch, "constant sizes passed as kernel arguments")

    #: the optional plan passes run, in order (None: the default list of
    #: :mod:`~pytato_like.target.loopy.passes`)
    passes: tuple | None = _knob(None, None, None,
                                 "the optional plan passes run, in order")
    #: names of the optional plan passes not to run
    disabled_passes: frozenset = _knob(
        frozenset(), None, None, "names of optional plan passes not run")

    # }}}

    # {{{ the program

    #: the storage decision's knobs (a
    #: :class:`~pytato_like.transform.materialize_cost.CostModel`; None:
    #: the default model)
    cost_model: CostModel | None = _knob(None, None, None,
                            "the storage decision's cost model")
    #: out-of-range gathers and negative integer powers raise at run time
    runtime_checks: bool = _knob(True, None, _switch,
                                 "run-time checks of gathers and powers")
    #: the kernel (entrypoint) name
    function_name: str = _knob(DEFAULT_FUNCTION_NAME, None, None,
                               "the kernel name")
    #: array and axis tag types not copied into the translation unit
    #: handed out as ``.program``
    array_tags_not_propagated: frozenset = _knob(
        frozenset(), None, None, "array tag types not copied to .program")
    axis_tags_not_propagated: frozenset = _knob(
        frozenset(), None, None, "axis tag types not copied to .program")
    #: loopy's own options given by name in the options dict
    loopy_options: Mapping[str, object] = _knob(
        constantdict(), None, None, "loopy option names given in the dict")

    # }}}

    #: the full compile report for this program (None: as
    #: ``PYTATO_LIKE_REPORT`` says, read by
    #: :mod:`~pytato_like.target.loopy.report` when it reports). Not
    #: part of :meth:`cache_key`: it changes no code.
    report: bool | None = _knob(None, None, None, "the compile report")
    #: the first call of a program not in the cache runs on the host
    #: (NumPy) while its kernels compile, when that evaluation is cheap
    #: (:mod:`~pytato_like.target.loopy.host_first_call`). Not part of
    #: :meth:`cache_key`: it changes no code.
    host_first_call: bool = _knob(
        True, "PYTATO_LIKE_HOST_FIRST_CALL", _switch,
        "first call of a program not in the cache on the host while it "
        "compiles")

    def __post_init__(self) -> None:
        for name, _, check, default in _field_table():
            value = getattr(self, name)
            # (a default is valid: built once per generate_loopy call,
            # the options are checked field by field only where set)
            if check is not None and value is not default:
                checked = check(name, value)
                if checked is not value:
                    object.__setattr__(self, name, checked)
        if self.passes is not None and not isinstance(self.passes, tuple):
            object.__setattr__(self, "passes", tuple(self.passes))
        if not isinstance(self.disabled_passes, frozenset):
            names = self.disabled_passes
            object.__setattr__(self, "disabled_passes", frozenset(
                [names] if isinstance(names, str) else names))
        if not isinstance(self.loopy_options, constantdict):
            object.__setattr__(self, "loopy_options",
                               constantdict(self.loopy_options))

    # {{{ building

    @classmethod
    def environment_variables(cls) -> dict[str, str]:
        """``field name -> environment variable`` of the fields that
        have one."""
        return {f.name: f.metadata["variable"] for f in dataclasses.fields(cls)
                if f.metadata["variable"] is not None}

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None,
                         **overrides: Any) -> CodegenOptions:
        """Options whose fields not in *overrides* come from their
        ``PYTATO_LIKE_*`` variable in *environ* (the process environment,
        read now) when set, else their default.

        :raises ~pytato_like.diagnostic.ConfigurationError: for a
            malformed variable (the message names it and its value) or an
            override that is not a field.
        """
        env = os.environ if environ is None else environ
        table = _field_table()
        unknown = set(overrides) - {name for name, _, _, _ in table}
        if unknown:
            raise ConfigurationError(
                f"CodegenOptions: unknown option(s) {sorted(unknown)}; "
                f"known are {sorted(name for name, _, _, _ in table)}")
        values: dict[str, Any] = {}
        for name, variable, check, _ in table:
            if variable is None or name in overrides:
                continue
            raw = env.get(variable)
            if raw is not None and raw.strip():
                assert check is not None    # (every variable has a checker)
                values[name] = check(variable, raw)
        values.update(overrides)
        return cls(**values)

    @classmethod
    def from_user(cls, options: object, **fixed: Any) -> CodegenOptions:
        """The options of a :func:`~pytato_like.target.loopy.generate_loopy`
        call from its *options* argument: None, a :class:`CodegenOptions`
        (used as given), a dict of field names and loopy option names, or
        a :class:`loopy.Options` (kept by the caller for loopy; our fields
        from the environment). The fields in *fixed* (``generate_loopy``'s
        other arguments: the function name, the tag filters) replace those
        of *options*.

        :raises ~pytato_like.diagnostic.ConfigurationError: for a key of
            the dict that is neither a field nor a loopy option, or a
            malformed value.
        """
        if isinstance(options, CodegenOptions):
            changed = {k: v for k, v in fixed.items()
                       if getattr(options, k) != v}
            return dataclasses.replace(options, **changed) if changed \
                else options
        if options is None or not isinstance(options, dict):
            # (a loopy.Options: the caller checks it is one)
            return cls.from_environment(**fixed)
        else:
            names = {name for name, _, _, _ in _field_table()}
            # (None for a knob: its default, as the dict form always had)
            ours = {k: v for k, v in options.items() if k in names
                    and not (v is None and cls._has_default_of_value(k))}
            rest = {k: v for k, v in options.items() if k not in names}
            if rest:
                loopy_names = _loopy_option_names()
                unknown = sorted(set(rest) - loopy_names)
                if unknown:
                    raise ConfigurationError(
                        f"generate_loopy: unknown option '{unknown[0]}'; "
                        f"known are {sorted(names)} and loopy's "
                        f"{sorted(loopy_names)}")
                ours["loopy_options"] = constantdict(rest)
            return cls.from_environment(**{**ours, **fixed})

    @classmethod
    def _has_default_of_value(cls, name: str) -> bool:
        """Whether field *name* has a default that is not None."""
        field = cls.__dataclass_fields__[name]
        return field.default is not None

    # }}}

    def cache_key(self) -> str:
        """A text equal for options that generate the same code: every
        field but :attr:`report` and :attr:`host_first_call`, by value
        (tag types by qualified name, mappings sorted). Computed once per
        options value."""
        return self._cache_key

    @functools.cached_property
    def _cache_key(self) -> str:
        # (cached_property writes the instance's __dict__ directly, which
        # a frozen dataclass allows)
        # Only fields that differ from their default are written (a
        # changed default changes the package's source fingerprint, which
        # the cache key holds too): building the key is then cheap for
        # the usual options, on every generate_loopy call.
        parts = []
        for name, _, _, default in _field_table():
            if name in _NOT_IN_KEY:
                continue
            value = getattr(self, name)
            if value is default or (type(value) is type(default)
                                    and value == default):
                continue
            parts.append((name, _value_text(value)))
        return repr(parts)


@functools.lru_cache(maxsize=64)
def _collection_text(value: frozenset | constantdict) -> str:
    """A stable text of a set of tag types or a mapping of loopy options."""
    if isinstance(value, frozenset):
        return repr(sorted(f"{t.__module__}.{t.__qualname__}"
                           if isinstance(t, type) else repr(t) for t in value))
    return repr(sorted((k, repr(v)) for k, v in value.items()))


def _value_text(value: object) -> str:
    if isinstance(value, (frozenset, constantdict)):
        return _collection_text(value)
    return repr(value)


@functools.cache
def _field_table() -> tuple[tuple[str, str | None, Checker | None, object],
                            ...]:
    """``(name, environment variable, checker, default)`` of every field
    of :class:`CodegenOptions`, in order."""
    return tuple((f.name, f.metadata["variable"], f.metadata["check"],
                  f.default if f.default_factory is dataclasses.MISSING
                  else f.default_factory())
                 for f in dataclasses.fields(CodegenOptions))


def _loopy_option_names() -> frozenset[str]:
    import loopy as lp
    return frozenset(k for k in vars(lp.Options()) if not k.startswith("_"))
