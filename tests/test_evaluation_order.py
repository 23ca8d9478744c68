"""The loopy target rounds every ``+ - * /`` as NumPy does
(target/loopy/evaluation_order.py): nested sums and products keep their
grouping in the OpenCL C, so results agree with NumPy to the bit, on
hand-picked groupings, a 2-d stencil chain, hypothesis-generated
expression trees and a 100 000-deep right-nested chain."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pytato_like as pt

cl = pytest.importorskip("pyopencl")


@pytest.fixture(scope="module")
def queue():
    return cl.CommandQueue(cl.create_some_context(interactive=False))


def spread(rng, n, dtype):
    """Values of many magnitudes and both signs, where the grouping of a
    sum or product changes its rounding."""
    mantissa = rng.random(n) + 0.5
    # (float32 products of four such values stay finite)
    top = 8 if dtype == np.float32 else 12
    exponent = rng.integers(-top, top, n).astype(np.float64)
    sign = rng.choice([-1.0, 1.0], n)
    return (sign * mantissa * 10.0 ** exponent).astype(dtype)


GROUPINGS = {
    "a + (b + c)": lambda a, b, c, d: a + (b + c),
    "(a + b) + (c + d)": lambda a, b, c, d: (a + b) + (c + d),
    "a - (b - c)": lambda a, b, c, d: a - (b - c),
    "a - (b + c) + d": lambda a, b, c, d: a - (b + c) + d,
    "a * (b * c)": lambda a, b, c, d: a * (b * c),
    "(a * b) * (c * d)": lambda a, b, c, d: (a * b) * (c * d),
    "a * (b / c)": lambda a, b, c, d: a * (b / c),
    "a / (b * c)": lambda a, b, c, d: a / (b * c),
    "a + b * (c + d)": lambda a, b, c, d: a + b * (c + d),
    "a * b + c * d": lambda a, b, c, d: a * b + c * d,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("grouping", sorted(GROUPINGS))
def test_groupings_match_numpy_to_the_bit(queue, grouping, dtype):
    n = 4096
    names = "abcd"
    args = [pt.make_placeholder(x, (n,), dtype) for x in names]
    rng = np.random.default_rng(len(grouping))
    host = {x: spread(rng, n, dtype) for x in names}
    prg = pt.generate_loopy({"out": GROUPINGS[grouping](*args)})
    _, out = prg(queue, **{x: v for x, v in host.items() if x in grouping})
    np.testing.assert_array_equal(
        out["out"], GROUPINGS[grouping](*(host[x] for x in names)))


def test_the_code_groups_later_operands():
    a, b, c = (pt.make_placeholder(x, (4096,), np.float64) for x in "abc")
    source = pt.generate_loopy({"s": a + (b + c), "p": a * (b * c)}).get_source()
    assert "+ (" in source and "* (" in source


def test_a_2d_stencil_chain_matches_numpy_to_the_bit(queue):
    x = pt.make_placeholder("x", (40, 50), np.float64)
    y = x
    for _ in range(3):
        y = y[1:-1, 1:-1] + y[2:, 2:]
    xv = spread(np.random.default_rng(4), 2000, np.float64).reshape(40, 50)
    ref = xv
    for _ in range(3):
        ref = ref[1:-1, 1:-1] + ref[2:, 2:]
    _, out = pt.generate_loopy({"y": y})(queue, x=xv)
    np.testing.assert_array_equal(out["y"], ref)


# {{{ random expression trees

OPS = {
    "+": lambda p, q: p + q,
    "-": lambda p, q: p - q,
    "*": lambda p, q: p * q,
    "/": lambda p, q: p / q,
}


@st.composite
def trees(draw, depth=0):
    """A binary expression tree over the leaves 0-3 (inputs) or a
    constant (float64 trees only)."""
    if depth >= 4 or (depth and draw(st.booleans())):
        return draw(st.one_of(st.integers(0, 3),
                              st.sampled_from([0.5, 3.0, -1.25])))
    return (draw(st.sampled_from(sorted(OPS))), draw(trees(depth + 1)),
            draw(trees(depth + 1)))


def evaluate(tree, leaves, constant):
    """*tree* on *leaves*, with no recursion deeper than the tree (4)."""
    if isinstance(tree, int):
        return leaves[tree]
    if isinstance(tree, float):
        return constant(tree)
    op, left, right = tree
    return OPS[op](evaluate(left, leaves, constant),
                   evaluate(right, leaves, constant))


@settings(max_examples=40, deadline=None)
@given(trees(), st.sampled_from([np.float32, np.float64]))
def test_random_trees_match_numpy_to_the_bit(queue, tree, dtype):
    n = 1024
    rng = np.random.default_rng(7)
    host = [spread(rng, n, dtype) for _ in range(4)]
    args = [pt.make_placeholder(f"x{k}", (n,), dtype) for k in range(4)]
    # (constants as arrays of the dtype: the float32 trees stay float32)
    value = evaluate(tree, args, lambda c: pt.full((n,), c, dtype))
    with np.errstate(all="ignore"):
        ref = evaluate(tree, host, lambda c: np.full((n,), c, dtype))
    if not isinstance(value, pt.Array):
        return  # a lone constant
    prg = pt.generate_loopy({"out": value})
    used = {a.name for a in pt.transform.InputGatherer()(value)}
    _, out = prg(queue, **{f"x{k}": h for k, h in enumerate(host)
                           if f"x{k}" in used})
    np.testing.assert_array_equal(out["out"], ref)

# }}}


def test_a_100_000_deep_right_nested_chain(queue):
    assert sys.getrecursionlimit() == 1000
    x = pt.make_placeholder("x", (3,), np.float64)
    y = x
    for _ in range(100_000):
        y = x + (0.5 * y + x)  # the inner sum is the later operand
    xv = np.array([0.1, 1e-17, -3.3])
    ref = xv
    for _ in range(100_000):
        ref = xv + (0.5 * ref + xv)
    _, (out,) = pt.generate_loopy(y)(queue, x=xv)
    np.testing.assert_array_equal(out, ref)
