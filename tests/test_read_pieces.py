"""Stored arrays reading concatenations, rolls and stacks through selects
are cut into the ranges where the selects are decided
(target/loopy/read_pieces.py): the same values as NumPy, no select left
where the cut applies, and the instruction left whole where it does not."""

from __future__ import annotations

import sys

import numpy as np
import pymbolic.primitives as prim
import pytest

from _kernel_source import has_select, select_conditions

import pytato_like as pt
from pytato_like.target.loopy import read_pieces
from pytato_like.target.loopy.instructions import Instruction

cl = pytest.importorskip("pyopencl")

C = 0.1


@pytest.fixture(scope="module")
def queue():
    return cl.CommandQueue(cl.create_some_context(interactive=False))


def _run(queue, outputs, inputs, expected):
    prg = pt.generate_loopy(outputs)
    _, out = prg(queue, **inputs)
    for name, value in expected.items():
        np.testing.assert_allclose(out[name], value, rtol=1e-15, atol=0)
    return prg


def test_ghost_cell_stencil_is_cut_into_boundary_and_interior(queue):
    n = 5000
    u = pt.make_placeholder("u", (n,), np.float64)
    gl = pt.make_placeholder("gl", (1,), np.float64)
    gr = pt.make_placeholder("gr", (1,), np.float64)
    ext = pt.concatenate([gl, u, gr])
    v = u + C * (ext[:-2] - 2 * u + ext[2:])
    rng = np.random.default_rng(1)
    uv, a, b = rng.random(n), rng.random(1), rng.random(1)
    e = np.concatenate([a, uv, b])
    prg = _run(queue, {"v": v}, {"u": uv, "gl": a, "gr": b},
               {"v": uv + C * (e[:-2] - 2 * uv + e[2:])})
    assert not has_select(prg.get_source())


@pytest.mark.parametrize("shift", [1, -1, 3, -7, 5002, 0])
def test_roll_stencil_is_cut_for_any_shift(queue, shift):
    n = 5000
    u = pt.make_placeholder("u", (n,), np.float64)
    v = u + C * (pt.roll(u, shift) - 2 * u + pt.roll(u, -1))
    uv = np.random.default_rng(2).random(n)
    prg = _run(queue, {"v": v}, {"u": uv},
               {"v": uv + C * (np.roll(uv, shift) - 2 * uv
                               + np.roll(uv, -1))})
    assert not has_select(prg.get_source())


def test_roll_along_the_second_axis_is_cut_along_it(queue):
    u = pt.make_placeholder("u", (40, 100), np.float64)
    v = 2 * pt.roll(u, 2, axis=1) - u
    uv = np.random.default_rng(3).random((40, 100))
    prg = _run(queue, {"v": v}, {"u": uv},
               {"v": 2 * np.roll(uv, 2, axis=1) - uv})
    assert not has_select(prg.get_source())


def test_an_inlined_stack_is_cut_per_position(queue):
    a = pt.make_placeholder("a", (1000,), np.float64)
    b = pt.make_placeholder("b", (1000,), np.float64)
    y = 3.0 * pt.stack([a, b]) + 1.0
    rng = np.random.default_rng(4)
    av, bv = rng.random(1000), rng.random(1000)
    prg = _run(queue, {"y": y}, {"a": av, "b": bv},
               {"y": 3.0 * np.stack([av, bv]) + 1.0})
    assert not has_select(prg.get_source())


def test_selects_on_two_axes_are_cut_along_the_last(queue):
    # the 2-d heat equation: rolls along both axes; the pieces cut the
    # contiguous axis, the row selects stay, constant along each run
    u = pt.make_placeholder("u", (64, 100), np.float64)
    v = (pt.roll(u, 1, axis=0) + pt.roll(u, -1, axis=0)
         + pt.roll(u, 1, axis=1) + pt.roll(u, -1, axis=1) - 4 * u)
    uv = np.random.default_rng(5).random((64, 100))
    prg = _run(queue, {"v": v}, {"u": uv},
               {"v": np.roll(uv, 1, axis=0) + np.roll(uv, -1, axis=0)
                + np.roll(uv, 1, axis=1) + np.roll(uv, -1, axis=1)
                - 4 * uv})
    source = prg.get_source()
    conditions = select_conditions(source)
    assert conditions       # the rows' wrap-around
    # no select tests a column (the run loop's index or its group id)
    assert all("_pt_group_id_1" in c for c in conditions)
    assert not [c for c in conditions
                if "_inner" in c or "_pt_group_id_0" in c]


def test_selects_on_two_outer_axes_stay_whole(queue):
    # cutting one would leave the other's selects in every piece's bulk
    u = pt.make_placeholder("u", (16, 16, 64), np.float64)
    v = pt.roll(u, 1, axis=0) + pt.roll(u, -1, axis=1)
    uv = np.random.default_rng(5).random((16, 16, 64))
    prg = _run(queue, {"v": v}, {"u": uv},
               {"v": np.roll(uv, 1, axis=0) + np.roll(uv, -1, axis=1)})
    assert has_select(prg.get_source())


def test_small_arrays_stay_whole(queue):
    u = pt.make_placeholder("u", (100,), np.float64)
    v = pt.roll(u, 1) - u
    uv = np.random.default_rng(6).random(100)
    prg = _run(queue, {"v": v}, {"u": uv}, {"v": np.roll(uv, 1) - uv})
    assert has_select(prg.get_source())


def test_symbolic_sizes_stay_whole(queue):
    n = pt.make_size_param("n")
    u = pt.make_placeholder("u", (n,), np.float64)
    g = pt.make_placeholder("g", (1,), np.float64)
    v = 2.0 * pt.concatenate([u, g])
    rng = np.random.default_rng(7)
    uv, gv = rng.random(3000), rng.random(1)
    prg = _run(queue, {"v": v}, {"u": uv, "g": gv, "n": 3000},
               {"v": 2.0 * np.concatenate([uv, gv])})
    assert has_select(prg.get_source())


def test_a_data_dependent_select_keeps_the_instruction_whole(queue):
    n = 3000
    u = pt.make_placeholder("u", (n,), np.float64)
    v = pt.where(u > 0.5, pt.roll(u, 1), u)
    uv = np.random.default_rng(8).random(n)
    prg = _run(queue, {"v": v}, {"u": uv},
               {"v": np.where(uv > 0.5, np.roll(uv, 1), uv)})
    assert has_select(prg.get_source())


def test_a_time_loop_of_cut_steps_matches_numpy(queue):
    n = 2048
    u0 = pt.make_placeholder("u", (n,), np.float64)
    u = u0
    uv = np.random.default_rng(9).random(n)
    ref = uv
    for _ in range(6):
        u = u + C * (pt.roll(u, 1) - 2 * u + pt.roll(u, -1))
        ref = ref + C * (np.roll(ref, 1) - 2 * ref + np.roll(ref, -1))
    prg = _run(queue, {"u": u}, {"u": uv}, {"u": ref})
    assert not has_select(prg.get_source())


# {{{ the analysis itself

def _var(name):
    return prim.Variable(name)


@pytest.mark.parametrize(("cond", "n", "cuts"), [
    # 2i + 3 >= 10 from i = 4 on
    (prim.Comparison(prim.Sum((prim.Product((2, _var("i"))), 3)), ">=", 10),
     100, {4}),
    # 5 - i > 0 below i = 5
    (prim.Comparison(prim.Sum((5, prim.Product((-1, _var("i"))))), ">", 0),
     100, {5}),
    # i == 7: true at 7 only
    (prim.Comparison(_var("i"), "==", 7), 100, {7, 8}),
    # never changes inside the extent
    (prim.Comparison(_var("i"), "<", 200), 100, set()),
])
def test_cut_positions_of_affine_conditions(cond, n, cuts):
    expr = prim.If(cond, _var("a"), _var("b"))
    found = read_pieces._cuts(expr, ("i",), (n,))
    assert found.get("i", set()) == cuts
    # against evaluating the condition at every position
    truth = [read_pieces._truth(*read_pieces._condition(cond, ("i",))[1:], i)
             for i in range(n)]
    assert {i for i in range(1, n) if truth[i] != truth[i - 1]} == cuts


def test_selects_changing_along_two_indices_give_cuts_on_both():
    expr = prim.Sum((
        prim.If(prim.Comparison(_var("i"), "<", 3), _var("a"), _var("b")),
        prim.If(prim.Comparison(_var("j"), "<", 5), _var("a"), _var("b"))))
    assert read_pieces._cuts(expr, ("i", "j"), (100, 100)) == {
        "i": {3}, "j": {5}}
    # one of them alone is cut
    assert read_pieces._cuts(expr.children[0], ("i", "j"),
                             (100, 100)) == {"i": {3}}


@pytest.mark.parametrize("cond", [
    prim.Comparison(prim.Product((_var("i"), _var("i"))), "<", 9),
    prim.Comparison(prim.Sum((_var("i"), _var("j"))), "<", 9),
    prim.Comparison(prim.Quotient(_var("i"), 2), "<", 9),
    prim.Comparison(prim.Subscript(_var("u"), (_var("i"),)), "<", 0.5),
    prim.LogicalAnd((prim.Comparison(_var("i"), "<", 9),
                     prim.Comparison(_var("i"), ">", 2))),
])
def test_conditions_that_are_not_decided(cond):
    assert read_pieces._condition(cond, ("i", "j")) is None
    expr = prim.If(cond, _var("a"), _var("b"))
    assert read_pieces._cuts(expr, ("i", "j"), (100, 100)) is None

# }}}


# {{{ deep DAGs and expressions

def test_a_deep_expression_stays_whole_without_recursion():
    assert sys.getrecursionlimit() == 1000
    i = _var("_pt_c0")
    expr = prim.If(prim.Comparison(i, "<", 1), _var("a"), _var("b"))
    for _ in range(100_000):
        expr = prim.Sum((expr, 1.0))
    insn = Instruction(None, ["y"], expr, ("_pt_c0",), (4096,), [], [],
                       set())
    insn.node = pt.make_placeholder("y", (4096,), np.float64)
    assert read_pieces.split_reads(insn) is None


def test_deep_chain_generates(deep_chain, queue):
    # a 100 000-step chain on 3 elements: below the size cut, walked
    # without recursion by everything before it
    x, y = deep_chain
    prg = pt.generate_loopy(y)
    xv = np.arange(3.0)
    _, (out,) = prg(queue, x=xv)
    ref = xv.copy()
    for _ in range(100_000):
        ref = 0.5 * ref + 1.0
    np.testing.assert_allclose(out, ref)

# }}}
