"""Default parallel schedule: loop-group inames to OpenCL work-groups and
work-items, without user transformations.

For a loop group with inames ``(i_0, ..., i_{d-1})`` (``i_{d-1}`` the
contiguous axis):

* ``i_{d-1}`` is split by :data:`WORK_GROUP_SIZE` (when it is shorter than that, it is
  ``l.0`` whole and ``i_{d-2}`` is split into ``l.1`` and ``g.0`` to fill
  the work-group): the inner part becomes
  ``l.0`` (consecutive work-items touch consecutive addresses; PoCL's
  work-group compiler turns the ``l.0`` loop into a vectorisable inner
  loop) and the outer part ``g.0``;
* ``i_{d-2}`` becomes ``g.1`` and ``i_{d-3}`` ``g.2``; further outer axes
  stay sequential loops inside each work-item;
* reduction inames stay sequential loops (each work-item reduces its own
  output elements: no atomics, no local-memory trees); in groups with
  reductions and a short contiguous axis (DG-like ``einsum("ij,ej->ei")``)
  the second-to-last axis is split by :data:`REDUCTION_ILP` with an
  ``ilp`` inner part: each work-item keeps that many accumulators, which
  hides the floating-point add latency of the sequential reduction and
  loads the shared operand once (measured: ~2x on the DG benchmark);
* 2-d groups with a reduction and two long axes (matmul-like products,
  ``sum(axis=1)`` of a 3-d array) are register-blocked instead: each
  work-item reduces a :data:`TILE_ROWS` x :data:`TILE_COLS` tile of
  outputs (``ilp`` inames: independent accumulators, each loaded operand
  reused), work-groups are :data:`TILE_LOCAL` x :data:`TILE_LOCAL`
  work-items (``l.1``, ``l.0``) so that they share rows of one operand and
  columns of the other in cache (matmul 1024^2 float64: 1.77 s -> 0.37 s
  on 2 cores; tried and not kept, all slower or within noise: local-memory
  prefetch of 64-wide reduction blocks, unrolling the reduction by 4,
  tiles 8x8, 4x16 and 4x4, and the same tiling for the DG case with
  7-wide column tiles).

PoCL's pthread device runs work-groups on all cores, so any program with
at least a few work-groups per core keeps both cores busy. Why this
mapping and this size: see :doc:`/codegen` (measured in
``bench/bench_execution.py``).

.. autodata:: WORK_GROUP_SIZE
.. autodata:: REDUCTION_ILP
.. autodata:: TILE_ROWS
.. autodata:: TILE_COLS
.. autodata:: TILE_LOCAL
.. autofunction:: parallelize
"""

from __future__ import annotations

import os

#: work-items per work-group along the contiguous axis
WORK_GROUP_SIZE = int(os.environ.get("PYTATO_LIKE_WORK_GROUP_SIZE", "64"))


#: outputs per work-item along the second-to-last axis of reduction groups
#: with a short contiguous axis (independent accumulators, shared loads)
REDUCTION_ILP = int(os.environ.get("PYTATO_LIKE_REDUCTION_ILP", "4"))


#: register tile (rows x contiguous columns) of outputs per work-item in
#: 2-d groups with a reduction and long axes (matmul-like products)
TILE_ROWS = int(os.environ.get("PYTATO_LIKE_TILE_ROWS", "4"))
TILE_COLS = int(os.environ.get("PYTATO_LIKE_TILE_COLS", "8"))
#: work-items per work-group along each axis of such a group
TILE_LOCAL = int(os.environ.get("PYTATO_LIKE_TILE_LOCAL", "8"))


def _register_block(knl, g: str, extents: tuple, work_group_size: int):
    """Each work-item reduces a TILE_ROWS x TILE_COLS tile of outputs:
    PoCL runs a work-item's reduction loop as scalar code (it vectorises
    across work-items only for loop-free bodies), so the tile gives that
    loop independent accumulators and contiguous loads along the last
    axis that LLVM's SLP vectoriser packs, and reuses each loaded operand
    TILE_ROWS or TILE_COLS times (matmul 1024^2: see the bench)."""
    import loopy as lp
    rows, cols = f"{g}_0", f"{g}_1"
    knl = lp.split_iname(knl, cols, TILE_COLS, inner_tag="ilp")
    # a squarish work-group tile (TILE_LOCAL x TILE_LOCAL work-items):
    # its work-items share the rows of one operand and the columns of the
    # other, which stay in cache while the work-group runs
    local_cols = max(1, min(TILE_LOCAL, -(-extents[1] // TILE_COLS)))
    local_rows = max(1, min(TILE_LOCAL, -(-extents[0] // TILE_ROWS)))
    knl = lp.split_iname(knl, f"{cols}_outer", local_cols, outer_tag="g.0",
                         inner_tag="l.0")
    knl = lp.split_iname(knl, rows, TILE_ROWS, inner_tag="ilp")
    knl = lp.split_iname(knl, f"{rows}_outer", local_rows, outer_tag="g.1",
                         inner_tag="l.1")
    return knl


def parallelize(knl, groups: dict[str, tuple], work_group_size: int | None = None,
                reduction_groups=frozenset()):
    """*knl* with the inames of each loop group (``name -> extents``;
    inames are ``f"{name}_{axis}"``) tagged as described above."""
    import loopy as lp
    if work_group_size is None:
        work_group_size = WORK_GROUP_SIZE
    tags = {}
    for g, extents in groups.items():
        d = len(extents)
        if d == 0:
            continue
        last = f"{g}_{d - 1}"
        extent = extents[-1]
        size = work_group_size
        if isinstance(extent, int):
            size = max(1, min(size, extent))
        outer_axes = list(range(d - 2, -1, -1))
        if (g in reduction_groups and d == 2 and TILE_ROWS * TILE_COLS > 1
                and isinstance(extent, int) and isinstance(extents[0], int)
                and extent >= TILE_COLS * 8 and extents[0] >= TILE_ROWS * 8):
            knl = _register_block(knl, g, extents, work_group_size)
            continue
        if isinstance(extent, int) and 1 < extent < work_group_size and d >= 2:
            # short contiguous axis (e.g. DOFs of an element): the whole
            # axis is l.0 and the next axis fills the work-group as l.1,
            # so that work-groups are not tiny (PoCL pays per work-group)
            tags[last] = "l.0"
            per_group = max(1, work_group_size // max(extent, 1))
            second = f"{g}_{d - 2}"
            if g in reduction_groups and REDUCTION_ILP > 1:
                # each work-item reduces for REDUCTION_ILP rows at once:
                # independent accumulators hide the add latency and the
                # operand indexed by the short axis is loaded once
                knl = lp.split_iname(knl, second, REDUCTION_ILP,
                                     outer_tag="g.0", inner_tag="ilp")
            elif per_group > 1:
                knl = lp.split_iname(knl, second, per_group,
                                     outer_tag="g.0", inner_tag="l.1")
            else:
                tags[second] = "g.0"
            outer_axes = outer_axes[1:]
            hw_names = ("g.1", "g.2")
        else:
            if size > 1:
                knl = lp.split_iname(knl, last, size, outer_tag="g.0",
                                     inner_tag="l.0")
            else:
                tags[last] = "g.0"
            hw_names = ("g.1", "g.2")
        for axis, hw in zip(outer_axes, hw_names, strict=False):
            tags[f"{g}_{axis}"] = hw
    if tags:
        knl = lp.tag_inames(knl, tags)
    return knl
