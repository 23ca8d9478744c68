"""Pickling round trips: every node class comes back equal (same hash) and
evaluates to the same values."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.testing import assert_results_close

A = np.arange(24.0).reshape(2, 3, 4)
I = np.array([2, 0, 1])


def _x():
    return pt.make_placeholder("x", (2, 3, 4), np.float64)


def _index():
    return pt.make_placeholder("idx", (3,), np.int64)


# each case: a function building the array from (x, idx) placeholders
CASES = {
    "Placeholder": lambda x, i: x,
    "IndexLambda": lambda x, i: pt.sin(x) * 2 + 1,
    "IndexLambda-reduction": lambda x, i: pt.sum(x, axis=(0, 2)) + pt.amax(x),
    "IndexLambda-where-cast": lambda x, i: pt.where(x > 3, x, -x).astype(np.int32),
    "Einsum": lambda x, i: pt.einsum("ijk,ilk->jl", x, x),
    "Reshape": lambda x, i: x.reshape(4, 6, order="F"),
    "AxisPermutation": lambda x, i: pt.transpose(x, (2, 0, 1)),
    "Roll": lambda x, i: pt.roll(x, -1, axis=1),
    "BasicIndex": lambda x, i: x[1, ::-2, 1:3],
    "AdvancedIndexInContiguousAxes": lambda x, i: x[:, i, 1:],
    "AdvancedIndexInNoncontiguousAxes": lambda x, i: x[0, :, i],
    "Concatenate": lambda x, i: pt.concatenate([x, x * 2], axis=1),
    "Stack": lambda x, i: pt.stack([x, x + 1], axis=-1),
    "creation": lambda x, i: pt.arange(4) + pt.eye(3, 4) + x,
}


@pytest.mark.parametrize("name", list(CASES))
def test_pickle_round_trip_is_equal_and_evaluates_equal(name):
    x, idx = _x(), _index()
    result = CASES[name](x, idx)
    restored = pickle.loads(pickle.dumps(result))
    assert type(restored) is type(result)
    assert restored is not result
    assert restored == result
    assert hash(restored) == hash(result)
    assert restored.shape == result.shape and restored.dtype == result.dtype
    inputs = {"x": A, "idx": I}
    expected = pt.generate_numpy(result)(
        **{k: v for k, v in inputs.items() if k in _names(result)})
    actual = pt.generate_numpy(restored)(
        **{k: v for k, v in inputs.items() if k in _names(restored)})
    assert_results_close(actual, expected, rtol=0, atol=0)


def _names(result):
    from pytato_like._traversal import topological_order
    return {n.name for n in topological_order([result])
            if isinstance(n, pt.Placeholder)}


def test_pickle_size_param_and_symbolic_shapes():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n, 2 * n), np.float32)
    result = pt.sum(x, axis=1) * n
    restored = pickle.loads(pickle.dumps(result))
    assert restored == result
    assert pickle.loads(pickle.dumps(n)) == n
    a = np.arange(18, dtype=np.float32).reshape(3, 6)
    np.testing.assert_array_equal(pt.generate_numpy(restored)(x=a),
                                  pt.generate_numpy(result)(x=a))


def test_pickle_dict_of_named_arrays_and_named_array():
    x = _x()
    d = pt.make_dict_of_named_arrays({"a": x * 2, "b": pt.sum(x, axis=0)})
    restored = pickle.loads(pickle.dumps(d))
    assert isinstance(restored, pt.DictOfNamedArrays)
    assert restored == d and hash(restored) == hash(d)
    assert_results_close(pt.generate_numpy(restored)(x=A),
                         pt.generate_numpy(d)(x=A))
    named = pickle.loads(pickle.dumps(d["b"]))
    assert isinstance(named, pt.NamedArray)
    assert named == d["b"]
    assert_results_close(pt.generate_numpy(named * 1)(x=A), A.sum(axis=0))


def test_pickled_subgraph_sharing_is_preserved():
    x = _x()
    shared = pt.exp(x)
    result = shared + shared * shared
    restored = pickle.loads(pickle.dumps(result))
    left = restored.bindings["_in0"]
    assert restored == result
    # one node, not three copies
    from pytato_like._traversal import topological_order
    assert len(topological_order([restored])) == len(topological_order([result]))
    assert isinstance(left, pt.Array)


def test_data_wrappers_compare_by_identity_across_pickling():
    data = np.arange(6.0)
    dw = pt.make_data_wrapper(data, name="table")
    result = pt.make_dict_of_named_arrays({"a": dw * 2, "b": dw + 1})
    restored = pickle.loads(pickle.dumps(result))
    # the data was copied, so the wrapper is a different input now...
    assert restored._data["a"].bindings["_in0"] is not dw
    assert restored != result
    # ...but both results still read one shared wrapper, and compute the same
    assert restored._data["a"].bindings["_in0"] is restored._data["b"].bindings["_in0"]
    assert_results_close(pt.generate_numpy(restored)(), pt.generate_numpy(result)())
    indexed = _x()[:, [0, 2], [1, 3]]  # NumPy indices: data wrappers
    assert_results_close(pt.generate_numpy(pickle.loads(pickle.dumps(indexed)))(x=A),
                         A[:, [0, 2], [1, 3]])
    same = pickle.loads(pickle.dumps(dw))
    np.testing.assert_array_equal(same.data, data)
    assert same.name == "table" and same.shape == (6,)
