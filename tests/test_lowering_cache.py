"""Lowering kept with the node, rolls sharing their expression, and the
storage decision that reads both.

``to_index_lambda`` keeps a built-in node's lowering with the node, and
rolls over a static extent share one expression per (rank, axis, extent,
shift). Checked here: the lowered lambdas compute what NumPy computes, the
kept lowering is invisible to hashing, equality and pickling, and the
storage decision is the same whether the lowerings are fresh or kept.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import pytato_like as pt
from pytato_like._traversal import topological_order
from pytato_like.array import IndexLambda, output_arrays
from pytato_like.testing import make_random_dag
from pytato_like.transform.lower_to_index_lambda import _LOWERED, to_index_lambda
from pytato_like.transform.materialize_cost import decide_storage


@pytest.mark.parametrize(("shape", "shift", "axis"), [
    ((7,), 1, 0), ((7,), -1, 0), ((7,), 8, 0), ((7,), -15, 0),
    ((3, 5), 2, 1), ((3, 5), -4, 0), ((3, 5), 13, 1), ((1, 4), 3, 1),
])
def test_lowered_rolls_equal_numpy(shape, shift, axis):
    x = pt.make_placeholder("x", shape)
    value = np.arange(float(np.prod(shape))).reshape(shape)
    # twice: the second lowering reuses the first's expression
    for _ in range(2):
        node = pt.roll(x, shift, axis=axis)
        lam = to_index_lambda(node)
        assert isinstance(lam, IndexLambda) and lam.shape == node.shape
        out = pt.generate_numpy(lam)(x=value)
        np.testing.assert_array_equal(out, np.roll(value, shift, axis=axis))


def test_rolls_of_different_arrays_are_not_confused():
    # same (rank, axis, extent, shift): one expression, each its own operand
    x = pt.make_placeholder("x", (6,))
    y = pt.make_placeholder("y", (6,), np.float32)
    lx, ly = to_index_lambda(pt.roll(x, 2)), to_index_lambda(pt.roll(y, 2))
    assert lx.expr is ly.expr
    assert lx.bindings["_in0"] is x and ly.bindings["_in0"] is y
    assert ly.dtype == np.float32
    xv = np.arange(6.0)
    yv = (np.arange(6) * 3).astype(np.float32)
    out = pt.generate_numpy(pt.make_dict_of_named_arrays({"a": lx, "b": ly}))(
        x=xv, y=yv)
    np.testing.assert_array_equal(out["a"], np.roll(xv, 2))
    np.testing.assert_array_equal(out["b"], np.roll(yv, 2))


def test_rolls_of_other_extents_get_their_own_expression():
    for n in (5, 6, 9):
        x = pt.make_placeholder("x", (n,))
        value = np.arange(float(n))
        out = pt.generate_numpy(to_index_lambda(pt.roll(x, 2)))(x=value)
        np.testing.assert_array_equal(out, np.roll(value, 2))


def test_kept_lowering_is_invisible():
    x = pt.make_placeholder("x", (4, 3))
    nodes = [pt.roll(x, 1, axis=1), x.T, x.reshape(12), x[1:, ::2],
             pt.concatenate([x, x]), pt.stack([x, x])]
    for node in nodes:
        twin = pickle.loads(pickle.dumps(node))
        h = hash(node)
        lam = to_index_lambda(node)
        assert to_index_lambda(node) is lam
        assert node.__dict__[_LOWERED] is lam
        assert hash(node) == h and node == twin
        # a pickled copy carries the DAG, not the kept lowering
        copy = pickle.loads(pickle.dumps(node))
        assert _LOWERED not in copy.__dict__ and copy == node
        # lowering the copy afresh gives an equal lambda
        assert to_index_lambda(copy) == lam


def _costs(result):
    outs = output_arrays(result)
    order = topological_order(outs)
    costs = decide_storage(outs, None, order)
    return [(c.ops, c.work, c.depth, c.uses, c.elementwise_uses, c.stored,
             c.reason) for c in (costs[id(n)] for n in order)]


def _fresh(result):
    """An equal DAG without kept lowerings."""
    return pickle.loads(pickle.dumps(result))


@pytest.mark.parametrize("seed", range(25))
def test_storage_decision_same_with_fresh_and_kept_lowerings(seed):
    result = make_random_dag(seed, n_ops=18).result
    first = _costs(result)      # lowers every node
    again = _costs(result)      # reads the kept lowerings
    fresh = _costs(_fresh(result))
    assert first == again == fresh


def test_stencil_decision_same_with_fresh_and_kept_lowerings():
    u = pt.make_placeholder("u", (50,))
    for _ in range(40):
        u = u + 0.1 * (pt.roll(u, 1) - 2 * u + pt.roll(u, -1))
    result = pt.make_dict_of_named_arrays({"u": u})
    assert _costs(result) == _costs(result) == _costs(_fresh(result))
