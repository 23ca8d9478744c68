"""DAGs far deeper than Python's recursion limit: a chain of 100 000
updates (200 000 nodes) is built, hashed, compared, pickled, printed and
evaluated at the default recursion limit; a DAG whose every level uses the
previous one several times (exponentially many paths) is handled in time
linear in its nodes; a deep chain through every node class evaluates like
the same loop in NumPy."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

import pytato_like as pt
from pytato_like._traversal import topological_order

DEPTH = 100_000
DEFAULT_RECURSION_LIMIT = 1000


def _update_chain(x, depth: int, constant: float = 1.0):
    y = x
    for _ in range(depth):
        y = 0.5 * y + constant
    return y


@pytest.fixture(scope="module")
def chain():
    """``y = 0.5*y + 1.0`` applied 100 000 times to a placeholder."""
    x = pt.make_placeholder("x", (3,), np.float64)
    return x, _update_chain(x, DEPTH)


@pytest.fixture(autouse=True)
def default_recursion_limit():
    assert sys.getrecursionlimit() == DEFAULT_RECURSION_LIMIT


def test_chain_has_two_nodes_per_update(chain):
    x, y = chain
    order = topological_order([y])
    assert len(order) == 2 * DEPTH + 1
    assert order[0] is x and order[-1] is y


def test_deep_chain_hashes_and_equals_a_rebuilt_copy(chain):
    x, y = chain
    copy = _update_chain(pt.make_placeholder("x", (3,), np.float64), DEPTH)
    assert copy is not y
    assert hash(copy) == hash(y)
    assert copy == y
    assert not (copy != y)


def test_deep_chain_differs_from_a_slightly_different_copy(chain):
    x, y = chain
    # same length, one constant changed at the very bottom
    bottom = 0.5 * x + 2.0
    different = _update_chain(bottom, DEPTH - 1)
    assert different != y
    assert not (different == y)
    # same updates on a placeholder of another name
    assert _update_chain(pt.make_placeholder("z", (3,), np.float64), DEPTH) != y


def test_deep_chain_pickles_round_trip(chain):
    x, y = chain
    restored = pickle.loads(pickle.dumps(y))
    assert restored is not y
    assert hash(restored) == hash(y)
    assert restored == y


def test_deep_chain_prints(chain):
    x, y = chain
    text = repr(y)
    assert "Placeholder(name='x'" in text
    assert text.count("\n") < 2 * DEPTH + 1  # one line per node at most
    assert str(y) == text


def test_deep_chain_evaluates_to_its_closed_form(chain):
    x, y = chain
    a = np.array([0.0, 1.0, 1000.0])
    out = pt.generate_numpy(y)(x=a)
    # y_n = 2 + 0.5**n (x - 2)
    np.testing.assert_allclose(out, 2.0 + 0.5**DEPTH * (a - 2.0), rtol=1e-15)


def test_short_chain_closed_form_depends_on_input():
    x = pt.make_placeholder("x", (3,), np.float64)
    a = np.array([0.0, 1.0, 1000.0])
    out = pt.generate_numpy(_update_chain(x, 20))(x=a)
    np.testing.assert_allclose(out, 2.0 + 0.5**20 * (a - 2.0), rtol=1e-13)


# {{{ sharing: exponentially many paths

LEVELS = 2000


def _shared_levels(x):
    """Every level reads the previous level four times: 4**LEVELS paths."""
    y = x
    for _ in range(LEVELS):
        y = ((y + y) + (y * 0.5 + y)) * (1 / 3.5)
    return y


def test_shared_dag_hash_equality_pickle_print_and_evaluation_are_linear():
    x = pt.make_placeholder("x", (4,), np.float64)
    y = _shared_levels(x)
    copy = _shared_levels(pt.make_placeholder("x", (4,), np.float64))
    assert len(topological_order([y])) == 5 * LEVELS + 1
    assert hash(copy) == hash(y)
    assert copy == y
    assert pickle.loads(pickle.dumps(y)) == y
    assert repr(y).count("\n") <= 5 * LEVELS + 1
    a = np.array([1.0, -2.0, 0.5, 8.0])
    expected = a.copy()
    for _ in range(LEVELS):
        expected = ((expected + expected) + (expected * 0.5 + expected)) * (1 / 3.5)
    np.testing.assert_allclose(pt.generate_numpy(y)(x=a), expected, rtol=1e-12)

# }}}


# {{{ every node class in one deep chain

# one index array object: data wrappers of the same data compare equal
ORDER = np.array([5, 3, 1, 0, 2, 4])


def _mixed_chain(xp, x, perm_matrix, steps: int):
    """A chain cycling through index lambdas, reshapes, transposes, rolls,
    basic and advanced indexing, einsums, concatenation and stacking."""
    y = x
    for k in range(steps):
        step = k % 8
        if step == 0:
            y = 0.5 * y + 1.0
        elif step == 1:
            y = xp.reshape(xp.transpose(xp.reshape(y, (2, 3))), (6,))
        elif step == 2:
            y = xp.roll(y, 1 + k % 5)
        elif step == 3:
            y = y[::-1]
        elif step == 4:
            y = y[ORDER]
        elif step == 5:
            y = xp.einsum("ij,j->i", perm_matrix, y)
        elif step == 6:
            y = xp.concatenate([y[3:], y[:3]])
        else:
            y = xp.stack([y, 2 * y])[1] * 0.5
    return y


def test_deep_chain_of_every_node_class_evaluates_like_numpy():
    steps = 40_000  # about 85 000 nodes
    rng = np.random.default_rng(0)
    perm = np.eye(6)[rng.permutation(6)]
    a = rng.standard_normal(6)
    x = pt.make_placeholder("x", (6,), np.float64)
    m = pt.make_data_wrapper(perm)
    y = _mixed_chain(pt, x, m, steps)
    nodes = topological_order([y])
    assert len(nodes) > 80_000
    assert {type(n).__name__ for n in nodes} >= {
        "IndexLambda", "Reshape", "AxisPermutation", "Roll", "BasicIndex",
        "AdvancedIndexInContiguousAxes", "Einsum", "Concatenate", "Stack",
        "Placeholder", "DataWrapper"}
    assert pickle.loads(pickle.dumps(y)).shape == (6,)
    assert _mixed_chain(pt, x, m, steps) == y
    np.testing.assert_allclose(pt.generate_numpy(y)(x=a),
                               _mixed_chain(np, a, perm, steps), rtol=1e-12)

# }}}

# vim: foldmethod=marker
