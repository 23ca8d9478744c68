"""Stored concatenations (and stacks) are written piece by piece: one
assignment per piece over the piece's own range, no select on the
concatenation axis. Results are checked against NumPy and the NumPy
target; the device code is inspected for the selects that were there."""

from __future__ import annotations

import re
import sys

import numpy as np
import pymbolic.primitives as prim
import pytest

from _kernel_source import has_select, kernels

import pytato_like as pt
from pytato_like.tags import ImplStored
from pytato_like.target.loopy import instructions
from pytato_like.target.loopy.options import CodegenOptions

cl = pytest.importorskip("pyopencl")


@pytest.fixture
def small_pieces(monkeypatch):
    """Small arrays written piece by piece too (by default a stored
    concatenation of fewer than pieces_min_size elements keeps its
    selects); the variable is read by each generate_loopy, and the plan
    cache key includes the setting."""
    monkeypatch.setenv("PYTATO_LIKE_PIECES_MIN_SIZE", "0")


def _run(queue, outputs, inputs, expected):
    """Run *outputs* (name -> array) on the device; compare each with
    *expected* (name -> NumPy result) and with the NumPy target."""
    prg = pt.generate_loopy(outputs)
    _, out = prg(queue, **inputs)
    ref = pt.generate_numpy(outputs)(**inputs)
    for name, want in expected.items():
        got = np.asarray(out[name])
        assert got.dtype == want.dtype, name
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
        np.testing.assert_allclose(got, ref[name], rtol=1e-12, atol=0)
    return prg


def _array_writes(source: str) -> int:
    """The number of assignments to array elements in device code."""
    return len(re.findall(r"^\s*\w+\[.*\] = ", source, re.M))


def _heat_update(n: int):
    c = 0.25
    first = pt.make_placeholder("a", (1,), np.float64)
    interior = pt.make_placeholder("b", (n - 2,), np.float64)
    last = pt.make_placeholder("c", (1,), np.float64)
    e0 = interior[:1] + c * (first - 2 * interior[:1] + interior[1:2])
    inner = interior[1:-1] + c * (interior[:-2] - 2 * interior[1:-1]
                                  + interior[2:])
    e1 = interior[-1:] + c * (interior[-2:-1] - 2 * interior[-1:] + last)
    out = pt.concatenate([e0, inner, e1]).tagged(ImplStored())

    def numpy(a, b, c_):
        u = np.concatenate([a, b, c_])
        return u[1:-1] + c * (u[:-2] - 2 * u[1:-1] + u[2:])
    return out, numpy


# {{{ the heat solver's update: no select on the concatenation axis

def test_stored_stencil_concatenation_has_no_select(queue, rng):
    n = 100_000
    out, numpy = _heat_update(n)
    a, b, c = rng.random(1), rng.random(n - 2), rng.random(1)
    prg = _run(queue, {"u": out}, {"a": a, "b": b, "c": c},
               {"u": numpy(a, b, c)})
    found = kernels(prg.get_source())
    assert found and not any(has_select(k) for k in found)
    # one assignment per piece into the output
    assert _array_writes(prg.get_source()) == 3
    # the interior is a kernel of its own, each work-item looping over a
    # run of cells (the parallel schedule); the end cells are straight code
    big = [k for k in found if "for (" in k]
    assert len(big) == 1 and _array_writes(big[0]) == 1
    assert "get_group_id" not in big[0]  # read once, as _pt_group_id_0


def test_read_only_concatenation_is_split_where_its_reader_is_stored(queue,
                                                                     rng):
    # not stored itself: inlined into its reader, whose instruction is cut
    # into the ranges of the pieces (read_pieces): no select left
    a = pt.make_placeholder("a", (3000,), np.float64)
    b = pt.make_placeholder("b", (2000,), np.float64)
    y = 2.0 * pt.concatenate([a, b])
    av, bv = rng.random(3000), rng.random(2000)
    prg = _run(queue, {"y": y}, {"a": av, "b": bv},
               {"y": 2.0 * np.concatenate([av, bv])})
    assert not has_select(prg.get_source())


def test_small_concatenation_stays_one_kernel(queue, rng):
    # below pieces_min_size: one instruction, one launch
    a = pt.make_placeholder("a", (3,), np.float64)
    b = pt.make_placeholder("b", (5,), np.float64)
    av, bv = rng.random(3), rng.random(5)
    prg = _run(queue, {"y": pt.concatenate([a, b])}, {"a": av, "b": bv},
               {"y": np.concatenate([av, bv])})
    assert len(prg.plan.launches) == 1


# }}}


# {{{ results equal NumPy

def _piece_arrays(rng, sizes, axis, other, dtype, computed):
    """Placeholders (and their values) of the given sizes along *axis*;
    computed pieces are ``2*x + 1`` of them (or their conjugate)."""
    arrays, values, lazy_pieces, np_pieces = {}, {}, [], []
    for k, s in enumerate(sizes):
        shape = (s, other) if axis == 0 else (other, s)
        name = f"p{k}"
        if np.dtype(dtype).kind == "c":
            v = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
                 ).astype(dtype)
        elif np.dtype(dtype).kind == "b":
            v = rng.random(shape) < 0.5
        else:
            v = rng.integers(-50, 50, shape).astype(dtype)
        ph = pt.make_placeholder(name, shape, dtype)
        arrays[name], values[name] = ph, v
        if computed and k % 2 == 0 and np.dtype(dtype).kind != "b":
            lazy_pieces.append(2 * ph + 1)
            np_pieces.append(2 * v + 1)
        elif computed and k % 2 == 0:
            lazy_pieces.append(pt.logical_not(ph))
            np_pieces.append(np.logical_not(v))
        else:
            lazy_pieces.append(ph)
            np_pieces.append(v)
    return values, lazy_pieces, np_pieces


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize(("sizes", "dtype", "computed"), [
    ((70, 30), "float64", True),
    ((1, 97, 1), "float64", True),
    ((1, 97, 1), "int32", False),
    ((0, 40, 1, 25), "complex128", True),
    ((5, 0, 1, 60, 3), "int32", True),
    ((5, 0, 1, 60, 3), "bool", True),
    ((33, 33, 34), "complex128", False),
    ((33, 33, 34), "bool", False),
    # three or more pieces of one shape share a loop (found by
    # test_time_tiles' random piece layouts: a missing barrier exemption)
    ((1, 341, 341, 341), "float64", True),
    ((20, 20, 20, 20, 5), "int32", False),
])
def test_stored_concatenation_equals_numpy(queue, rng, small_pieces, axis,
                                           sizes, dtype, computed):
    values, lazy, ref = _piece_arrays(rng, sizes, axis, 7, dtype, computed)
    y = pt.concatenate(lazy, axis=axis)
    want = np.concatenate(ref, axis=axis)
    prg = _run(queue, {"y": y}, values, {"y": want})
    non_empty = sum(s > 0 for s in sizes)
    # one assignment per non-empty piece, none with a select
    assert _array_writes(prg.get_source()) == non_empty
    assert not has_select(prg.get_source()) or dtype == "complex128"


@pytest.mark.parametrize("axis", [0, 1])
def test_mixed_dtypes_are_cast_per_piece(queue, rng, small_pieces, axis):
    shapes = [(4, 6), (3, 6)] if axis == 0 else [(6, 4), (6, 3)]
    a = pt.make_placeholder("a", shapes[0], np.int32)
    b = pt.make_placeholder("b", shapes[1], np.float32)
    c = pt.make_placeholder("c", shapes[1], np.uint8)
    av = rng.integers(-(2**30), 2**30, shapes[0]).astype(np.int32)
    bv = rng.standard_normal(shapes[1]).astype(np.float32)
    cv = rng.integers(0, 255, shapes[1]).astype(np.uint8)
    y = pt.concatenate([a * 3, b, c + c], axis=axis)   # uint8 wraps
    want = np.concatenate([av * 3, bv, cv + cv], axis=axis)
    assert want.dtype == np.float64
    _run(queue, {"y": y}, {"a": av, "b": bv, "c": cv}, {"y": want})


def test_concatenation_inside_a_larger_program(queue, rng):
    # a stored concatenation read by a stencil, a reduction and an
    # elementwise output, three time steps deep
    n = 20_000
    u0 = pt.make_placeholder("u", (n,), np.float64)
    left = pt.make_placeholder("left", (1,), np.float64)
    uv, lv = rng.random(n), rng.random(1)
    u, ref = u0, uv
    for _ in range(3):
        padded = pt.concatenate([left, u, u[-1:]]).tagged(ImplStored())
        u = padded[1:-1] + 0.1 * (padded[:-2] - 2 * padded[1:-1] + padded[2:])
        p = np.concatenate([lv, ref, ref[-1:]])
        ref = p[1:-1] + 0.1 * (p[:-2] - 2 * p[1:-1] + p[2:])
    total = pt.sum(padded)
    prg = _run(queue, {"u_new": u, "total": total, "twice": 2 * padded},
               {"u": uv, "left": lv},
               {"u_new": ref, "total": np.sum(p), "twice": 2 * p})
    for k in kernels(prg.get_source()):
        # the only selects left are not on a concatenation axis (there
        # are none: every concatenation is stored)
        assert not has_select(k)


def test_nested_inlined_concatenations_are_flattened(queue, rng, small_pieces):
    a = pt.make_placeholder("a", (10,), np.float64)
    b = pt.make_placeholder("b", (20,), np.float64)
    inner = pt.concatenate([a + 1, b])          # inlined (read once)
    y = pt.concatenate([inner, 2 * a])
    av, bv = rng.random(10), rng.random(20)
    prg = _run(queue, {"y": y}, {"a": av, "b": bv},
               {"y": np.concatenate([av + 1, bv, 2 * av])})
    assert _array_writes(prg.get_source()) == 3
    assert not has_select(prg.get_source())


def test_many_pieces_fall_back_to_one_instruction(queue, rng, small_pieces):
    n = CodegenOptions.from_environment().pieces_max + 1
    phs = [pt.make_placeholder(f"x{k}", (2,), np.float64) for k in range(n)]
    vals = {f"x{k}": rng.random(2) for k in range(n)}
    prg = _run(queue, {"y": pt.concatenate(phs)}, vals,
               {"y": np.concatenate(list(vals.values()))})
    assert _array_writes(prg.get_source()) == 1


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_stored_stack_equals_numpy(queue, rng, small_pieces, axis):
    phs = [pt.make_placeholder(f"s{k}", (5, 6), np.float64) for k in range(3)]
    vals = {f"s{k}": rng.random((5, 6)) for k in range(3)}
    y = pt.stack([phs[0] * 2, phs[1], phs[2] - 1], axis=axis)
    want = np.stack([vals["s0"] * 2, vals["s1"], vals["s2"] - 1], axis=axis)
    prg = _run(queue, {"y": y}, vals, {"y": want})
    assert _array_writes(prg.get_source()) == 3
    assert not has_select(prg.get_source())
    assert len(prg.plan.launches) == 1       # one shape: one kernel


def test_symbolic_sizes(queue, rng, small_pieces):
    n = pt.make_size_param("n")
    a = pt.make_placeholder("a", (n,), np.float64)
    b = pt.make_placeholder("b", (3,), np.float64)
    y = pt.concatenate([b, 2 * a, a + b[:1]])
    prg = pt.generate_loopy(y)
    assert prg.get_source().count(" = ") >= 3 and not has_select(prg.get_source())
    for size in (0, 1, 1000):
        av, bv = rng.random(size), rng.random(3)
        _, (got,) = prg(queue, a=av, b=bv, n=size)
        np.testing.assert_allclose(
            got, np.concatenate([bv, 2 * av, av + bv[:1]]), rtol=1e-14)


def test_runtime_checks_of_pieces_still_raise(queue, small_pieces):
    a = pt.make_placeholder("a", (10,), np.float64)
    i = pt.make_placeholder("i", (3,), np.int64)
    y = pt.concatenate([a, a[i]]).tagged(ImplStored())
    prg = pt.generate_loopy(y)
    _, (got,) = prg(queue, a=np.arange(10.0), i=np.array([9, 0, -10]))
    np.testing.assert_array_equal(
        got, np.concatenate([np.arange(10.0), [9.0, 0.0, 0.0]]))
    with pytest.raises(IndexError):
        prg(queue, a=np.arange(10.0), i=np.array([9, 10, 0]))


# }}}


# {{{ sizes as arguments and 64-bit indices

def test_big_piece_kernel_is_shared_across_sizes(queue, rng):
    # the interior's kernel takes its sizes (and its offset) as arguments
    keys = []
    for n in (6000, 9000):
        out, numpy = _heat_update(n)
        a, b, c = rng.random(1), rng.random(n - 2), rng.random(1)
        prg = _run(queue, {"u": out}, {"a": a, "b": b, "c": c},
                   {"u": numpy(a, b, c)})
        keys.append({k.key for k in prg.plan.kernels})
    assert keys[0] & keys[1]


def test_offsets_become_size_arguments(queue, rng):
    x = pt.make_placeholder("x", (5000,), np.float64)
    y = pt.make_placeholder("y", (5000,), np.float64)
    xv, yv = rng.random(5000), rng.random(5000)
    prg = _run(queue, {"z": pt.concatenate([x, y])}, {"x": xv, "y": yv},
               {"z": np.concatenate([xv, yv])})
    # both pieces in one kernel; the second at an offset passed as size
    assert len(prg.plan.launches) == 1
    assert re.search(r"\[_pt_s\d \+ ", prg.get_source()) or re.search(
        r"\+ _pt_s\d\]", prg.get_source())
    off = pt.generate_loopy(pt.concatenate([x, y]),
                            options={"sizes_as_arguments": False})
    assert "5000 +" in off.get_source() or "+ 5000" in off.get_source()


def test_pieces_past_2_to_the_31_get_64_bit_indices():
    # code generation only: nothing of this size is allocated
    from pytato_like.target.loopy.codegen import build_plan
    big = pt.make_placeholder("big", (2**31 - 5,), np.int8)
    tail = pt.make_placeholder("tail", (10,), np.int8)
    plan, _ = build_plan({"y": pt.concatenate([big, tail + 1])})
    codes = [k.device_code for k in plan.kernels]
    # (the tail's offset, 2147483643, is a literal or a size argument)
    tail_kernel = [c for c in codes if "+ 1)" in c]
    assert len(tail_kernel) == 1
    assert "(long) get_" in tail_kernel[0] or "long const" in tail_kernel[0]
    small, _ = build_plan({"y": pt.concatenate([big[:5000], tail + 1])})
    assert all("long" not in k.device_code for k in small.kernels)


# }}}


# {{{ many look-alike pieces (piece_runs): one expression per run

def _slices(x, width, order):
    return [x[k * width:(k + 1) * width] for k in order]


@pytest.mark.parametrize("count", [300, 2000])
def test_many_slices_are_one_expression_of_the_piece_number(queue, rng, count):
    width = 3
    x = pt.make_placeholder("x", (count * width,), np.float64)
    xv = rng.standard_normal(count * width)
    order = list(reversed(range(count)))
    y = pt.concatenate(_slices(x, width, order))
    want = np.concatenate([xv[k * width:(k + 1) * width] for k in order])
    prg = _run(queue, {"y": y}, {"x": xv}, {"y": want})
    # the kernel does not grow with the pieces: one read of x per run
    # (the last piece, k = 0, has no offset to fill in: a run of its own)
    source = prg.get_source()
    assert len(re.findall(r"\bx\[", source)) <= 2, source
    assert len(source) < 4000


def test_runs_break_where_the_pattern_changes(queue, rng):
    x = pt.make_placeholder("x", (60,), np.float64)
    z = pt.make_placeholder("z", (4,), np.float64)
    xv, zv = rng.standard_normal(60), rng.standard_normal(4)
    # two progressions of different steps, a foreign piece between two
    # runs, a permutation (no progression), pieces of another width
    order = [0, 1, 2, 3, 4, 5, 11, 9, 7, 5, 3, 1]
    pieces = [x[2 * k:2 * k + 2] for k in order] + [z]
    pieces += [x[2 * k:2 * k + 2] for k in [6, 7, 8, 9, 10]]
    pieces += [x[2 * k:2 * k + 2] for k in [3, 0, 2, 1]]
    pieces += [x[3 * k:3 * k + 3] for k in range(5)]
    pieces += [x[k:k + 2] + 1.0 for k in range(20, 30)]
    y = pt.concatenate(pieces)
    want = np.concatenate(
        [xv[2 * k:2 * k + 2] for k in order] + [zv]
        + [xv[2 * k:2 * k + 2] for k in [6, 7, 8, 9, 10]]
        + [xv[2 * k:2 * k + 2] for k in [3, 0, 2, 1]]
        + [xv[3 * k:3 * k + 3] for k in range(5)]
        + [xv[k:k + 2] + 1.0 for k in range(20, 30)])
    _run(queue, {"y": y}, {"x": xv, "z": zv}, {"y": want})
    from pytato_like.transform.lower_to_index_lambda import to_index_lambda
    from pytato_like.transform.piece_runs import piece_runs
    runs = [(r.first, r.stop)
            for r in piece_runs(pieces, to_index_lambda) if r.template]
    # x[0:2] and x[0:3] have no offset to fill in (k = 0): runs of their
    # own; so have the sums, each reading a slice node of its own
    assert runs == [(1, 6), (6, 12), (13, 18), (23, 27)]


def test_many_pieces_of_mixed_dtypes_along_an_inner_axis(queue, rng):
    x = pt.make_placeholder("x", (3, 200), np.float32)
    xv = rng.standard_normal((3, 200)).astype(np.float32)
    w = pt.make_placeholder("w", (3, 1), np.float64)
    wv = rng.standard_normal((3, 1))
    pieces = [x[:, k:k + 2] for k in range(1, 150, 3)] + [w]
    want = np.concatenate([xv[:, k:k + 2] for k in range(1, 150, 3)] + [wv],
                          axis=1)
    _run(queue, {"y": pt.concatenate(pieces, axis=1)}, {"x": xv, "w": wv},
         {"y": want})


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_stack_of_many_rows_is_one_expression(queue, rng, axis):
    x = pt.make_placeholder("x", (400, 3, 4), np.int32)
    xv = rng.integers(-100, 100, (400, 3, 4)).astype(np.int32)
    rows = list(range(1, 400, 2))
    y = pt.stack([x[k] for k in rows], axis=axis).astype(np.float64)
    want = np.stack([xv[k] for k in rows], axis=axis).astype(np.float64)
    prg = _run(queue, {"y": y}, {"x": xv}, {"y": want})
    assert len(re.findall(r"\bx\[", prg.get_source())) <= 2


def test_large_piece_expressions_are_not_compared():
    """A piece of more than TEMPLATE_MAX_SIZE expression nodes is left
    alone (the template mappers are recursive pymbolic mappers; an
    IndexLambda's expression is hashed recursively when it is built, so
    it cannot be 100 000 deep)."""
    from pytato_like.array import IndexLambda
    from pytato_like.transform.lower_to_index_lambda import to_index_lambda
    from pytato_like.transform.piece_runs import TEMPLATE_MAX_SIZE, piece_runs
    x = pt.make_placeholder("x", (4,), np.float64)
    expr = prim.Subscript(prim.Variable("_in0"), (prim.Variable("_0"),))
    for k in range(TEMPLATE_MAX_SIZE):
        expr = prim.Sum((expr, k % 3))
    deep = IndexLambda(expr, (4,), np.float64, {"_in0": x}, None)
    runs = piece_runs([deep] * 6 + [x[k:k + 4] for k in range(0, 24, 4)],
                      to_index_lambda)
    assert [(r.first, r.stop, r.template is None) for r in runs] == [
        *[(k, k + 1, True) for k in range(7)], (7, 12, False)]

# }}}


# {{{ deep DAGs

def test_deeply_nested_concatenation_is_walked_without_recursion():
    assert sys.getrecursionlimit() == 1000
    x = pt.make_placeholder("x", (1,), np.float64)
    y = x
    for _ in range(100_000):
        y = pt.concatenate([y, x])
    # every level inlined: more pieces than pieces_max, one instruction
    assert instructions.stored_pieces(y, lambda ary: True) is None
    pieces = instructions.stored_pieces(y, lambda ary: ary is not y.arrays[0])
    assert [p.offset for _, p in pieces] == [0, 100_000]

# }}}
