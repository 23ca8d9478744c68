"""The boundary/interior split of :mod:`pytato_like.distributed.overlap`.

The pass is checked on its own with placeholders standing for receives (a
``source_time`` that gives them times), against the NumPy target on the
DAG as written -- hand-made stencils and hypothesis-generated ones -- and
through :func:`~pytato_like.find_distributed_partition` on one rank that
sends its halos to itself, against serial NumPy. The runs on 2 ranks are
in ``tests/mpi/checks.py`` (case ``overlap``)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytato_like as pt
from pytato_like.array import Placeholder
from pytato_like.distributed import (
    find_distributed_partition,
    staple_distributed_send,
)
from pytato_like.distributed.overlap import split_interior_from_boundary
from pytato_like.tags import ImplStored
from pytato_like.transform._graph import toposort, walk_children
from tests._periodic_heat import (
    periodic_heat,
    placeholder_heat,
    run_on_one_rank,
)

C = 0.25


def _source_time(times):
    def source_time(ary):
        return times.get(ary.name) if isinstance(ary, Placeholder) else None
    return source_time


def _times(outputs, times):
    """Time of every node (as the pass defines it) by id."""
    source_time = _source_time(times)
    result = {}
    for node in toposort(list(outputs.values()), walk_children):
        src = source_time(node)
        result[id(node)] = src if src is not None else max(
            (result[id(k)] for k in walk_children(node)), default=0)
    return result


def _evaluate(outputs, inputs):
    used = {node.name for node in toposort(list(outputs.values()),
                                           walk_children)
            if isinstance(node, Placeholder)}
    return pt.generate_numpy(pt.make_dict_of_named_arrays(outputs))(
        **{k: v for k, v in inputs.items() if k in used})


def _inputs(outputs, seed=0):
    rng = np.random.default_rng(seed)
    return {node.name: rng.standard_normal(node.shape)
            for node in toposort(list(outputs.values()), walk_children)
            if isinstance(node, Placeholder)}


def _interiors(outputs):
    """The stored interiors in the DAG (the split arrays themselves are
    gone where every user read slices of them)."""
    return [node for node in toposort(list(outputs.values()), walk_children)
            if _stored(node)]


def _stored(ary):
    return any(isinstance(tag, ImplStored) for tag in ary.tags)


def _unless_stored(ary):
    return () if _stored(ary) else walk_children(ary)


def _deep_lengths(outputs, times):
    """The lengths of the deep rows of the arrays split deep: computed
    arrays (not stored) of time 0 that are longer than *strip* rows (the
    pieces of each step's expression have its step's length)."""
    time = _times(outputs, times)
    return sorted({node.shape[0]
                   for node in toposort(list(outputs.values()), walk_children)
                   if isinstance(node, pt.array.IndexLambda)
                   and not _stored(node) and node.size > 12
                   and time[id(node)] == 0})


# {{{ the pass on its own

def test_stencil_steps_split_with_interiors_of_the_earlier_time():
    outputs, times = placeholder_heat(60, 5)
    split, n_split = split_interior_from_boundary(
        outputs, _source_time(times), min_interior_elements=8,
        deep_interiors=False)
    # every step but the last (whose only user is the output) is split
    assert n_split == 4
    inputs = _inputs(outputs)
    np.testing.assert_array_equal(_evaluate(split, inputs)["u"],
                                  _evaluate(outputs, inputs)["u"])
    interiors = _interiors(split)
    assert [a.shape for a in interiors] == [(58,)] * 4
    # step k's interior needs only the receives of the steps before it: it
    # can run while step k's halos travel
    time = _times(split, times)
    assert sorted(time[id(a)] for a in interiors) == [0, 1, 2, 3]


def test_deep_interiors_of_all_steps_need_no_receive():
    n, steps = 80, 5
    outputs, times = placeholder_heat(n, steps)
    split, n_split = split_interior_from_boundary(
        outputs, _source_time(times), min_interior_elements=8)
    assert n_split == steps     # (the output's step too)
    inputs = _inputs(outputs)
    np.testing.assert_array_equal(_evaluate(split, inputs)["u"],
                                  _evaluate(outputs, inputs)["u"])
    time = _times(split, times)
    # step k's rows k:n-k read no halo, ever: each is computed from the one
    # before, none needs a receive; they are not stored, so the
    # partitioner computes them with the output's, in one kernel
    assert _deep_lengths(split, times) == [n - 2 * k
                                           for k in range(steps, 0, -1)]
    # step k's strips hold the rows the later strips read: the output's k
    # rows, one more per earlier step (computed twice where they overlap
    # the deep rows); each needs the receives of its own step
    strips = sorted((a.shape[0], time[id(a)]) for a in _interiors(split))
    assert strips == sorted(2 * [(2 * steps - k, k)
                                 for k in range(1, steps + 1)])


def test_an_output_that_would_widen_the_strips_too_much_stays_whole():
    # 5 steps of 60 rows: splitting the output too would make the first
    # step's strips 9 rows on each side, more than a quarter of 60; the
    # steps before it are split as without the output (strips of 7 rows)
    n, steps = 60, 5
    outputs, times = placeholder_heat(n, steps)
    split, n_split = split_interior_from_boundary(
        outputs, _source_time(times), min_interior_elements=8)
    assert n_split == steps - 1
    assert not isinstance(split["u"], pt.array.Concatenate)
    assert _deep_lengths(split, times) == [
        n - 2 * k for k in range(steps - 1, 0, -1)]
    assert max(a.shape[0] for a in _interiors(split)) == 2 * steps - 3
    inputs = _inputs(outputs)
    np.testing.assert_array_equal(_evaluate(split, inputs)["u"],
                                  _evaluate(outputs, inputs)["u"])


def test_strips_never_read_deep_rows():
    outputs, times = placeholder_heat(80, 6)
    split, _ = split_interior_from_boundary(
        outputs, _source_time(times), min_interior_elements=8)
    n_reading_strips = 0
    for strip in (a for a in _interiors(split) if a.size <= 12):
        below = [a for a in toposort(list(walk_children(strip)),
                                     _unless_stored) if _stored(a)]
        # (the first step's strips read the input itself)
        assert all(a.size <= 12 for a in below), [a.shape for a in below]
        n_reading_strips += bool(below)
    assert n_reading_strips == 2 * 4


def test_strips_wider_than_a_quarter_fall_back_to_steps():
    # 8 steps: strips of up to 13 rows on each side of 40 rows
    outputs, times = placeholder_heat(40, 8)
    split, n_split = split_interior_from_boundary(
        outputs, _source_time(times), min_interior_elements=8)
    per_step, n_per_step = split_interior_from_boundary(
        outputs, _source_time(times), min_interior_elements=8,
        deep_interiors=False)
    assert n_split == n_per_step == 7
    assert sorted(a.shape for a in _interiors(split)) == \
        sorted(a.shape for a in _interiors(per_step)) == [(38,)] * 7
    inputs = _inputs(outputs)
    np.testing.assert_array_equal(_evaluate(split, inputs)["u"],
                                  _evaluate(outputs, inputs)["u"])


def _halo_groups(n, steps, halo, stored, sends=True):
    """Heat steps in groups of *halo*: *halo* cells exchanged each way
    (placeholders ``gl<k>``/``gr<k>`` of time ``k + 1``), then up to *halo*
    steps on the extended field, which shrinks by a cell per side and step
    (reading it through the slices ``ext[:-2]``, ``ext[1:-1]``,
    ``ext[2:]``), the user's ``ImplStored`` on each if *stored*."""
    u = pt.make_placeholder("u", (n,))
    times = {}
    done = k = 0
    while done < steps:
        todo = min(halo, steps - done)
        if sends:
            u = staple_distributed_send(u[:halo], 0, ("l", k), u)
            u = staple_distributed_send(u[-halo:], 0, ("r", k), u)
        gl = pt.make_placeholder(f"gl{k}", (halo,))
        gr = pt.make_placeholder(f"gr{k}", (halo,))
        times[gl.name] = times[gr.name] = k + 1
        ext = pt.concatenate([gl, u, gr])
        for _ in range(todo):
            if stored:
                ext = ext.tagged(ImplStored())
            ext = ext[1:-1] + C * (ext[:-2] - 2 * ext[1:-1] + ext[2:])
        u = ext[halo - todo:halo - todo + n]
        done += todo
        k += 1
    return {"u": u}, times


def _strips_reading_wide_rows(split, n):
    """The narrow stored arrays (strips) that compute from an array of
    more than a quarter of *n* rows that is not stored (deep rows)."""
    wide_readers = []
    for strip in _interiors(split):
        if strip.shape[0] >= n // 4:
            continue
        below = toposort(list(walk_children(strip)), _unless_stored)
        if any(isinstance(a, pt.array.IndexLambda) and not _stored(a)
               and a.shape[0] >= n // 4 for a in below):
            wide_readers.append(strip)
    return wide_readers


@pytest.mark.parametrize("stored", [False, True])
def test_steps_on_a_halo_extended_field_split_deep(stored):
    # each step reads the one before through slices of it, not as a
    # whole: the deep rows of a step still come from the deep rows of the
    # one before, and its strips from its strips
    n, steps, halo = 200, 8, 4
    outputs, times = _halo_groups(n, steps, halo, stored)
    split, n_split = split_interior_from_boundary(
        outputs, _source_time(times), min_interior_elements=8)
    assert n_split == steps
    inputs = _inputs(outputs)
    np.testing.assert_array_equal(_evaluate(split, inputs)["u"],
                                  _evaluate(outputs, inputs)["u"])
    assert not _strips_reading_wide_rows(split, n)
    # the deep rows are not stored, the user's tag notwithstanding: the
    # partitioner computes them with the output's, in one kernel
    assert max(a.shape[0] for a in _interiors(split)) < n // 4
    # the deep rows of step j of group g: the extended field has
    # n + 2 * (halo - j) rows, and every exchange so far (g + 1) makes
    # *halo* more rows at each end depend on receives
    assert _deep_lengths(split, times) == sorted(
        n - 2 * j - 2 * halo * g
        for g in range(steps // halo) for j in range(1, halo + 1))


@pytest.mark.parametrize("deep", [False, True])
def test_sends_need_only_the_boundary_cells(deep):
    n, steps = 60, 3
    u = pt.make_placeholder("u", (n,))
    times = {}
    for k in range(steps):
        u = staple_distributed_send(u[:1], 0, ("l", k), u)
        u = staple_distributed_send(u[-1:], 0, ("r", k), u)
        gl = pt.make_placeholder(f"gl{k}", (1,))
        gr = pt.make_placeholder(f"gr{k}", (1,))
        times[gl.name] = times[gr.name] = k + 1
        ext = pt.concatenate([gl, u, gr])
        u = u + C * (ext[:-2] - 2 * u + ext[2:])
    split, n_split = split_interior_from_boundary(
        {"u": u}, _source_time(times), min_interior_elements=8,
        deep_interiors=deep)
    # (deep, the output's step is split too)
    assert n_split == (steps if deep else steps - 1)
    holders = []
    node = split["u"]
    while isinstance(node, pt.DistributedSendRefHolder):
        holders.append(node)
        node = node.passthrough_data
    assert sorted(h.comm_tag for h in holders) == sorted(
        (side, k) for side in "lr" for k in range(steps))
    for holder in holders:
        if holder.comm_tag[1] == 0:
            continue  # slices of the input
        # what a send computes (stored interiors and strips are computed
        # apart): single cells, never a whole field
        computed = [a for a in toposort([holder.send_data], _unless_stored)
                    if not isinstance(a, (Placeholder, pt.array.BasicIndex))
                    and not _stored(a)]
        assert all(a.size == 1 for a in computed), [a.shape for a in computed]
        assert computed or deep
        if deep:
            # the sends read strips of at most 2 * steps cells
            stored = [a for a in toposort([holder.send_data], _unless_stored)
                      if _stored(a)]
            assert all(a.size <= 2 * steps for a in stored), \
                [a.shape for a in stored]
    # the values, the sends' data included, are those of the DAG as written
    inputs = _inputs({"u": u})
    np.testing.assert_array_equal(_evaluate(split, inputs)["u"],
                                  _evaluate({"u": u}, inputs)["u"])
    for holder in holders:
        sent = _evaluate({"d": holder.send_data}, inputs)["d"]
        original = _evaluate({"d": next(
            h for h in toposort([u], walk_children)
            if isinstance(h, pt.DistributedSendRefHolder)
            and h.comm_tag == holder.comm_tag).send_data}, inputs)["d"]
        np.testing.assert_array_equal(sent, original)


@pytest.mark.parametrize("case", ["roll", "sum", "small", "row", "transpose"])
def test_arrays_without_edge_rows_are_left_alone(case):
    n = 50
    u = pt.make_placeholder("u", (n, n) if case == "transpose" else (n,))
    g = pt.make_placeholder("g", (1, n) if case == "transpose" else (1,))
    times = {"g": 1}
    if case == "transpose":
        ext = pt.concatenate([g, u[1:]])
        x = ext.T + ext          # the receive's row becomes a column
    else:
        ext = pt.concatenate([g, u[1:]])
        x = {"roll": lambda: pt.roll(ext, 1),       # wraps the edge inside
             "sum": lambda: ext + pt.sum(ext),      # every row reads all
             "small": lambda: 2 * ext,              # interior too small
             "row": lambda: ext + ext[0]}[case]()   # every row reads row 0
    h = pt.make_placeholder("h", x.shape)
    times["h"] = 2
    outputs = {"a": x + h, "b": 3 * x}   # x: shared, used later
    split, n_split = split_interior_from_boundary(
        outputs, _source_time(times),
        min_interior_elements=10 ** 6 if case == "small" else 8)
    assert n_split == 0
    assert all(split[k] is outputs[k] for k in outputs)


def test_function_call_results_keep_their_values():
    u = pt.make_placeholder("u", (50,))
    g = pt.make_placeholder("g", (1,))
    h = pt.make_placeholder("h", (50,))
    x = 2 * pt.concatenate([g, u[1:]])
    outputs = {"a": x + h, "b": x * 2,
               "c": pt.trace_call(lambda y: 3 * y, x)}
    split, n_split = split_interior_from_boundary(
        outputs, _source_time({"g": 1, "h": 2}), min_interior_elements=8)
    assert n_split == 2    # x, and the output 2 * x (deep)
    inputs = _inputs(outputs)
    got, want = _evaluate(split, inputs), _evaluate(outputs, inputs)
    for k in outputs:
        np.testing.assert_array_equal(got[k], want[k])


def test_split_of_a_shifted_two_dimensional_field():
    n, m = 40, 3
    u = pt.make_placeholder("u", (n, m))
    g = pt.make_placeholder("g", (2, m))
    h = pt.make_placeholder("h", (n, m))
    times = {"g": 1, "h": 2}
    ext = pt.concatenate([g, u, g])
    x = pt.sin(ext[1:-3]) * ext[4:] + u[:, ::-1]
    outputs = {"a": x + h, "b": x * 2}
    split, n_split = split_interior_from_boundary(
        outputs, _source_time(times), min_interior_elements=8,
        deep_interiors=False)
    assert n_split == 1
    interior, = _interiors(split)
    # ext[1:-3] reads one halo row at the top, ext[4:] two at the bottom
    assert interior.shape == (n - 3, m)
    assert _times(split, times)[id(interior)] == 0
    inputs = _inputs(outputs)
    got, want = _evaluate(split, inputs), _evaluate(outputs, inputs)
    for k in outputs:
        np.testing.assert_array_equal(got[k], want[k])


@pytest.mark.parametrize("deep", [False, True])
def test_deep_chain_splits_without_recursion(deep):
    depth = 100_000
    assert sys.getrecursionlimit() <= 10_000
    u = pt.make_placeholder("u", (40,))
    g = pt.make_placeholder("g", (1,))
    h = pt.make_placeholder("h", (40,))
    x = pt.concatenate([g, u[1:]])
    for _ in range(depth):
        x = 0.5 * x + u
    outputs = {"a": x + h, "b": 2 * x}
    split, n_split = split_interior_from_boundary(
        outputs, _source_time({"g": 1, "h": 2}), min_interior_elements=8,
        deep_interiors=deep)
    # (deep: x and the output 2 * x, each into its deep rows and a strip
    # of the one row that reads g)
    assert n_split == (2 if deep else 1)
    if deep:
        assert [a.shape for a in _interiors(split)] == [(1,), (1,)]
        assert _deep_lengths(split, {"g": 1, "h": 2}) == [39]
    else:
        interior, = _interiors(split)
        assert interior.shape == (39,)
        assert not any(isinstance(a, Placeholder) and a.name == "g"
                       for a in toposort([interior], walk_children))

# }}}


# {{{ random stencil programs

@st.composite
def stencil_programs(draw):
    n = draw(st.integers(12, 40))
    cols = draw(st.sampled_from([(), (3,)]))
    pool = [pt.make_placeholder("u", (n, *cols)),
            pt.make_placeholder("v", (n, *cols))]
    times: dict[str, int] = {}
    steps = draw(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 99),
                                    st.integers(0, 99), st.integers(1, 3)),
                          min_size=1, max_size=14))
    for kind, i, j, t in steps:
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        if kind == 0:
            new = a + b
        elif kind == 1:
            new = 0.5 * a - b
        elif kind in (2, 3):   # a window of a halo-extended field
            k = 1 + j % 3
            name = f"g{len(times)}"
            times[name] = t
            g = pt.make_placeholder(name, (k, *cols))
            ext = pt.concatenate([g, a, g]) if kind == 2 else \
                pt.concatenate([g, a])
            offset = j % (ext.shape[0] - n + 1)
            new = ext[offset:offset + n]
        elif kind == 4:
            new = pt.sin(a) + b[::-1] if j % 2 else pt.sin(a)
        elif kind == 5:
            new = pt.roll(a, 1 + j % 3, axis=0)
        elif kind == 6:
            new = a + b[j % n]
        else:
            new = pt.concatenate([a[j % n:], b[:j % n]]) if j % n else a
        pool.append(new)
    later = pt.make_placeholder("later", (n, *cols))
    times["later"] = 4
    outputs = {f"o{k}": ary for k, ary in enumerate(pool[2:])}
    outputs.update({f"l{k}": ary * later for k, ary in enumerate(pool[2:])})
    return outputs, times


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(stencil_programs())
def test_random_stencils_keep_their_values(program):
    outputs, times = program
    inputs = _inputs(outputs, seed=len(outputs))
    want = _evaluate(outputs, inputs)
    for deep in (False, True):
        split, n_split = split_interior_from_boundary(
            outputs, _source_time(times), min_interior_elements=4,
            deep_interiors=deep)
        got = _evaluate(split, inputs)
        for k in outputs:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        stored = len(_interiors(split))
        # an interior per split; deep: and up to two strips
        assert stored == n_split if not deep else \
            n_split <= stored <= 3 * n_split


@st.composite
def halo_chains(draw):
    """Several fields stepped together: each step reads each field
    extended by halos of 1-2 rows (placeholders of that step's time) at
    random row offsets, plus a multiple of another field; the boundary
    rows may be sent."""
    n = draw(st.integers(40, 120))
    cols = draw(st.sampled_from([(), (2,)]))
    n_fields = draw(st.integers(1, 2))
    steps = draw(st.integers(2, 6))
    fields = [pt.make_placeholder(f"u{f}", (n, *cols))
              for f in range(n_fields)]
    times: dict[str, int] = {}
    for k in range(steps):
        new = []
        for f, u in enumerate(fields):
            if draw(st.booleans()):
                u = staple_distributed_send(u[:1], 0, ("l", f, k), u)
            h_l, h_r = draw(st.integers(0, 2)), draw(st.integers(1, 2))
            pieces = []
            for side, h in (("l", h_l), ("r", h_r)):
                if h:
                    name = f"g{side}{f}_{k}"
                    times[name] = k + 1
                    pieces.append(pt.make_placeholder(name, (h, *cols)))
                else:
                    pieces.append(None)
            ext = pt.concatenate([p for p in (pieces[0], u, pieces[1])
                                  if p is not None])
            offsets = draw(st.lists(st.integers(0, h_l + h_r), min_size=1,
                                    max_size=3))
            value = fields[(f + 1) % n_fields] * 0.5
            for j, a in enumerate(offsets):
                value = value + (0.25 + j) * ext[a:a + n]
            new.append(value)
        fields = new
    later = pt.make_placeholder("later", (n, *cols))
    times["later"] = steps + 1
    outputs = {f"u{f}": u for f, u in enumerate(fields)}
    outputs.update({f"l{f}": u * later for f, u in enumerate(fields)})
    return outputs, times


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(halo_chains())
def test_random_halo_chains_keep_their_values(program):
    outputs, times = program
    inputs = _inputs(outputs, seed=3)
    want = _evaluate(outputs, inputs)
    split, n_split = split_interior_from_boundary(
        outputs, _source_time(times), min_interior_elements=8)
    got = _evaluate(split, inputs)
    for k in outputs:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    # the stored arrays of time 0 (interiors of the first step) need no
    # receive; those of later times are narrow strips or step-by-step
    # interiors (deep rows are computed with their users, not stored)
    time = _times(split, times)
    for ary in _interiors(split):
        if time[id(ary)] == 0:
            assert not any(isinstance(a, Placeholder) and a.name in times
                           for a in toposort([ary], walk_children))


def test_random_halo_chains_do_split_deep():
    # (what the property above exercises: deep splits in most programs)
    from hypothesis import find
    found = find(halo_chains(), lambda program: sum(
        1 for a in _interiors(split_interior_from_boundary(
            program[0], _source_time(program[1]), min_interior_elements=8)[0])
        if a.shape[0] < 10) >= 4,
        settings=settings(max_examples=200, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow]))
    assert found


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(40, 120), st.integers(1, 7), st.integers(1, 3),
       st.booleans(), st.booleans())
def test_random_halo_groups_keep_their_values(n, steps, halo, stored, sends):
    outputs, times = _halo_groups(n, steps, halo, stored, sends)
    split, _ = split_interior_from_boundary(
        outputs, _source_time(times), min_interior_elements=8)
    inputs = _inputs(outputs, seed=5)
    np.testing.assert_array_equal(_evaluate(split, inputs)["u"],
                                  _evaluate(outputs, inputs)["u"])
    assert not _strips_reading_wide_rows(split, n)

# }}}


# {{{ through the partitioner, one rank sending its halos to itself

def test_partitioner_splits_by_default_and_sending_parts_compute_boundaries():
    n, steps, fields = 40_000, 4, 2
    dag = periodic_heat(n, steps, fields)
    rng = np.random.default_rng(3)
    inputs = {f"u{f}": rng.standard_normal(n) for f in range(fields)}
    want = {}
    for name, u in inputs.items():
        for _ in range(steps):
            u = u + C * (np.roll(u, 1) - 2 * u + np.roll(u, -1))
        want[name] = u

    def largest_computed_by_senders(partition):
        sizes = [partition.name_to_output[name].size
                 for part in partition.parts.values() if part.name_to_send_nodes
                 for name in part.output_names]
        return max(sizes)

    split = find_distributed_partition(None, dag)
    whole = find_distributed_partition(None, dag, split_interior=False)
    # written as a whole, each step's sending part computes the whole field;
    # split, it computes strips of boundary cells (as wide as the later
    # steps' strips need: 2 * steps - 1 cells at most), and the deep rows
    # of all steps are computed with the outputs, in the last part: no
    # part stores anything wider than a strip but the outputs
    assert largest_computed_by_senders(whole) == n
    assert largest_computed_by_senders(split) == 2 * steps - 1
    stored_wide = [name for part in split.parts.values()
                   for name in part.output_names
                   if split.name_to_output[name].size > 2 * steps
                   and name not in split.overall_output_names]
    assert stored_wide == []
    # a part per step (its strips and sends), and the last one
    assert len(split.parts) == steps + 1
    for partition in (split, whole):
        got = run_on_one_rank(partition, inputs)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-13,
                                       atol=1e-13)
    got_split, got_whole = run_on_one_rank(split, inputs), run_on_one_rank(whole, inputs)
    for name in want:
        np.testing.assert_array_equal(got_split[name], got_whole[name])

def test_step_by_step_interiors_on_request():
    # deep_interiors=False: each step's interior in a part of its own,
    # computed while that step's halos travel; the same values
    n, steps, fields = 40_000, 4, 2
    dag = periodic_heat(n, steps, fields)
    rng = np.random.default_rng(5)
    inputs = {f"u{f}": rng.standard_normal(n) for f in range(fields)}
    deep = find_distributed_partition(None, dag)
    per_step = find_distributed_partition(None, dag, deep_interiors=False)
    interiors = sorted(per_step.name_to_output[name].shape
                       for part in per_step.parts.values()
                       for name in part.output_names
                       if name not in per_step.overall_output_names
                       and per_step.name_to_output[name].size > 2 * steps)
    assert interiors == [(n - 2,)] * (fields * (steps - 1))
    assert len(per_step.parts) > len(deep.parts)
    got, want = run_on_one_rank(per_step, inputs), run_on_one_rank(deep, inputs)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    from pytato_like.diagnostic import DistributedPartitionError
    with pytest.raises(DistributedPartitionError,
                       match=r"deep_interiors must be True or False"):
        find_distributed_partition(None, dag, deep_interiors=1)


def test_split_interior_must_be_a_bool():
    from pytato_like.diagnostic import DistributedPartitionError
    with pytest.raises(DistributedPartitionError,
                       match=r"split_interior must be 'auto', True or "
                             r"False, not 'yes' \(on rank 0\)"):
        find_distributed_partition(None, periodic_heat(10, 2, 1),
                                   split_interior="yes")

# }}}

# vim: foldmethod=marker
