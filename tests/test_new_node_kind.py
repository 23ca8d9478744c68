"""A node kind added outside the package: :class:`Clip` (``numpy.clip``
with constant bounds) declares its fields and its ``to_index_lambda`` rule,
nothing else, and runs on both targets, through the mappers, partitioning
and visualisation. References are NumPy's ``clip`` and the hand-built
lambda's meaning."""

import pickle

import numpy as np
import pymbolic.primitives as prim
import pytest

import pytato_like as pt
from pytato_like import transform as tr
from pytato_like.analysis import get_num_nodes
from pytato_like.array import ARRAY, VALUE, Array, IndexLambda
from pytato_like.partition import (
    execute_partition,
    find_partition,
    generate_code_for_partition,
)
from pytato_like.scalar_expr import index_vars
from pytato_like.transform.lower_to_index_lambda import to_index_lambda


class Clip(Array):
    """*array* clipped to ``[lo, hi]``, as :func:`numpy.clip`."""

    __slots__ = ("array", "lo", "hi")
    _mapper_method = "map_clip"
    _fields = (("array", ARRAY), ("lo", VALUE), ("hi", VALUE))

    def __init__(self, array, lo, hi, axes=None, tags=frozenset(),
                 non_equality_tags=frozenset()):
        self.array = array
        self.lo = lo
        self.hi = hi
        self.shape = array.shape
        self.dtype = array.dtype
        self._finish_init(axes, tags, non_equality_tags)

    def to_index_lambda(self) -> IndexLambda:
        x = prim.Subscript(prim.Variable("x"), tuple(index_vars(self.ndim)))
        lo, hi = self.dtype.type(self.lo), self.dtype.type(self.hi)
        expr = prim.If(prim.Comparison(x, "<", lo), lo,
                       prim.If(prim.Comparison(x, ">", hi), hi, x))
        return IndexLambda(expr, self.shape, self.dtype, {"x": self.array},
                           None, axes=self.axes, tags=self.tags)


def _program():
    x = pt.make_placeholder("x", (6, 5), np.float64)
    # the new node between built-in ones, read at a shifted index too
    c = Clip(2 * x, -1.0, 1.0)
    y = c + pt.roll(c, 1, axis=1) * x
    return x, c, y


def _reference(xv):
    c = np.clip(2 * xv, -1.0, 1.0)
    return c + np.roll(c, 1, axis=1) * xv


XV = np.linspace(-1.2, 1.3, 30).reshape(6, 5)


def test_to_index_lambda_uses_the_declared_rule():
    x, c, _ = _program()
    lam = to_index_lambda(c)
    assert isinstance(lam, IndexLambda)
    assert lam.bindings["x"] is c.array
    assert lam.shape == c.shape and lam.dtype == c.dtype


def test_numpy_target_matches_numpy_clip():
    _, _, y = _program()
    out = pt.generate_numpy(y)(x=XV)
    np.testing.assert_allclose(out, _reference(XV), rtol=1e-15)


@pytest.mark.opencl
def test_loopy_target_matches_numpy_clip(queue):
    _, c, y = _program()
    prg = pt.generate_loopy(pt.make_dict_of_named_arrays({"y": y, "c": c}))
    _, out = prg(queue, x=XV)
    np.testing.assert_allclose(out["y"], _reference(XV), rtol=1e-15)
    np.testing.assert_array_equal(out["c"], np.clip(2 * XV, -1.0, 1.0))


def test_mappers_copy_walk_and_compare_the_new_node():
    x, c, y = _program()
    copied = tr.CopyMapper()(y)
    assert copied == y and hash(copied) == hash(y)
    assert tr.InputGatherer()(y) == frozenset({x})
    assert c in tr.DependencyMapper()(y)
    assert get_num_nodes(y) == get_num_nodes(copied)
    # a user transform replacing the input reaches through the new node
    x2 = pt.make_placeholder("x2", (6, 5), np.float64)

    class Rename(tr.CopyMapper):
        def map_placeholder(self, expr):
            return x2 if expr is x else super().map_placeholder(expr)

    renamed = Rename()(y)
    assert tr.InputGatherer()(renamed) == frozenset({x2})
    out = pt.generate_numpy(renamed)(x2=XV)
    np.testing.assert_allclose(out, _reference(XV), rtol=1e-15)
    # the code-generation preprocessor lowers it like a built-in kind
    from pytato_like.codegen import CodeGenPreprocessor
    lowered = CodeGenPreprocessor()(y)
    assert not any(isinstance(n, Clip) for n in tr.collect_nodes(
        lowered, lambda n: True))
    out = pt.generate_numpy(lowered)(x=XV)
    np.testing.assert_allclose(out, _reference(XV), rtol=1e-15)
    # printing, pickling and structural equality come from the fields
    assert "Clip" in str(c)
    assert pickle.loads(pickle.dumps(y)) == y
    assert Clip(2 * x, -1.0, 1.0) == c
    assert Clip(2 * x, -1.0, 0.5) != c


def test_partition_with_the_new_node_in_its_own_part():
    x, c, y = _program()
    part = {id(c): "clip", id(c.array): "clip"}
    partition = find_partition(pt.make_dict_of_named_arrays({"y": y}),
                               lambda n: part.get(id(n), "rest"))
    assert "clip" in partition.parts
    prgs = generate_code_for_partition(partition, target="numpy")
    result = execute_partition(partition, prgs, None, {"x": XV})
    np.testing.assert_allclose(result["y"], _reference(XV), rtol=1e-15)


def test_visualisation_draws_the_new_node():
    _, c, y = _program()
    dot = pt.get_dot_graph(y)
    assert "Clip" in dot
    assert "Clip" in pt.get_ascii_graph(y)


def test_deep_chain_of_new_nodes(deep_chain):
    # 100 000 nested clips at the default recursion limit
    x, _ = deep_chain
    y = x
    for _ in range(100_000):
        y = Clip(y, -1.0, 1.0)
    copied = tr.CopyMapper()(y)
    assert copied == y
    assert get_num_nodes(y) == 100_001
    out = pt.generate_numpy(y)(x=np.array([-3.0, 0.25, 7.0]))
    np.testing.assert_array_equal(out, [-1.0, 0.25, 1.0])
