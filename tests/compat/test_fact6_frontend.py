"""Issue 9, fact 6 (front-end part): ``pytato.raising`` on the index
lambdas the front end builds, user subclasses of ``Array`` and of the node
classes built with pytato's keyword arguments, size parameters passed as
program inputs, and ``pad`` with array-like ``pad_width``. Values are
checked against NumPy through the NumPy target."""

import pickle

import numpy as np
import pymbolic.primitives as prim
import pytest

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.array import ARRAY, VALUE
from pytato_like.raising import (
    BinaryOp,
    BinaryOpType,
    BroadcastOp,
    C99CallOp,
    FullOp,
    LogicalNotOp,
    ReduceOp,
    WhereOp,
    index_lambda_to_high_level_op,
)
from pytato_like.reductions import MaxReductionOperation, SumReductionOperation
from pytato_like.transform import CopyMapper, WalkMapper

# {{{ raising

X = pt.make_placeholder("x", (3, 4), np.float64)
Y = pt.make_placeholder("y", (4,), np.float64)


@pytest.mark.parametrize(("build", "op", "x1", "x2"), [
    (lambda: X + Y, BinaryOpType.ADD, X, Y),
    (lambda: X - Y, BinaryOpType.SUB, X, Y),
    (lambda: 2 - X, BinaryOpType.SUB, 2.0, X),
    (lambda: X * 3, BinaryOpType.MULT, X, 3.0),
    (lambda: X / Y, BinaryOpType.TRUEDIV, X, Y),
    (lambda: X // Y, BinaryOpType.FLOORDIV, X, Y),
    (lambda: X % Y, BinaryOpType.MOD, X, Y),
    (lambda: X ** Y, BinaryOpType.POWER, X, Y),
    (lambda: X < Y, BinaryOpType.LESS, X, Y),
    (lambda: pt.greater_equal(X, Y), BinaryOpType.GREATER_EQUAL, X, Y),
    (lambda: pt.equal(X, Y), BinaryOpType.EQUAL, X, Y),
    (lambda: pt.not_equal(X, Y), BinaryOpType.NOT_EQUAL, X, Y),
    (lambda: pt.logical_and(X > 0, Y > 0), BinaryOpType.LOGICAL_AND, None, None),
])
def test_raise_binary_ops(build, op, x1, x2):
    hlo = index_lambda_to_high_level_op(build())
    assert isinstance(hlo, BinaryOp) and hlo.binary_op is op
    if x1 is not None:
        assert hlo.x1 == x1 if isinstance(x1, pt.Array) else hlo.x1 == x1
        assert hlo.x2 == x2 if isinstance(x2, pt.Array) else hlo.x2 == x2


def test_raise_unsigned_subtraction():
    u = pt.make_placeholder("u", (3,), np.uint8)
    v = pt.make_placeholder("v", (3,), np.uint8)
    hlo = index_lambda_to_high_level_op(u - v)
    assert hlo == BinaryOp(BinaryOpType.SUB, u, v)


def test_raised_binary_op_recomputes_the_array():
    # rebuilding from the raised op with NumPy's operator gives the same values
    import operator
    numpy_op = {BinaryOpType.ADD: operator.add, BinaryOpType.SUB: operator.sub,
                BinaryOpType.MULT: operator.mul,
                BinaryOpType.TRUEDIV: operator.truediv}
    rng = np.random.default_rng(0)
    xv, yv = rng.random((3, 4)), rng.random(4) + 1
    for expr in (X + Y, X - Y, Y * X, X / Y):
        hlo = index_lambda_to_high_level_op(expr)
        values = {"x": xv, "y": yv}
        a1 = values[hlo.x1.name]
        a2 = values[hlo.x2.name]
        np.testing.assert_allclose(pt.generate_numpy(expr)(x=xv, y=yv),
                                   numpy_op[hlo.binary_op](a1, a2))


def test_raise_c99_where_not_broadcast_full():
    assert index_lambda_to_high_level_op(pt.sin(X)) == C99CallOp("sin", (X,))
    assert index_lambda_to_high_level_op(pt.arctan2(X, Y)) == C99CallOp(
        "atan2", (X, Y))
    cond = X > 0
    assert index_lambda_to_high_level_op(pt.where(cond, X, Y)) == WhereOp(
        cond, X, Y)
    assert index_lambda_to_high_level_op(pt.logical_not(cond)) == LogicalNotOp(cond)
    assert index_lambda_to_high_level_op(pt.broadcast_to(Y, (3, 4))) == \
        BroadcastOp(Y)
    assert index_lambda_to_high_level_op(X.astype(np.float32)) == BroadcastOp(X)
    assert index_lambda_to_high_level_op(pt.full((2, 3), 7.0)) == FullOp(7.0)


def test_raise_reductions():
    s = pt.sum(X, axis=1)
    hlo = index_lambda_to_high_level_op(s)
    assert isinstance(hlo, ReduceOp)
    assert hlo.op == SumReductionOperation and hlo.x == X
    assert dict(hlo.axes) == {1: "_r0"}
    hlo = index_lambda_to_high_level_op(pt.amax(X, axis=0, keepdims=True))
    assert hlo.op == MaxReductionOperation and dict(hlo.axes) == {0: "_r0"}
    hlo = index_lambda_to_high_level_op(pt.sum(X))
    assert set(hlo.axes) == {0, 1}
    # any() of a float array compares with 0 inside the reduction
    hlo = index_lambda_to_high_level_op(pt.any(X, axis=0))
    assert hlo.x == X and set(hlo.axes) == {0}


def test_raise_unknown():
    with pytest.raises(diagnostic.UnknownIndexLambdaExpr):
        index_lambda_to_high_level_op(pt.maximum(X, Y))  # a nested If
    with pytest.raises(diagnostic.UnknownIndexLambdaExpr):
        index_lambda_to_high_level_op(X[::-1, 1:])  # not an index lambda
    with pytest.raises(diagnostic.UnknownIndexLambdaExpr):
        index_lambda_to_high_level_op(pt.to_index_lambda(X.T))

# }}}


# {{{ user subclasses constructed with pytato's keyword arguments

class MyPlaceholder(pt.Placeholder):
    pass


class MyIndexLambda(pt.IndexLambda):
    pass


def _my_lambda(x, **extra):
    i = prim.Variable("_0")
    return MyIndexLambda(
        expr=prim.Subscript(prim.Variable("_in0"), (i,)) * 2,
        shape=(3,), dtype=np.dtype(np.float64), bindings={"_in0": x},
        var_to_reduction_descr={}, axes=(pt.Axis(frozenset()),),
        tags=frozenset(), non_equality_tags=frozenset(), **extra)


def test_node_subclasses_with_pytato_keywords():
    x = MyPlaceholder(name="x", shape=(3,), dtype=np.dtype(np.float64),
                      axes=(pt.Axis(frozenset()),), tags=frozenset(),
                      non_equality_tags=frozenset())
    a, b = _my_lambda(x), _my_lambda(x)
    assert a == b and hash(a) == hash(b)
    plain = pt.IndexLambda(expr=a.expr, shape=a.shape, dtype=a.dtype,
                           bindings=a.bindings, var_to_reduction_descr={},
                           axes=a.axes, tags=frozenset())
    assert a != plain  # a different class is a different node
    assert a != _my_lambda(pt.make_placeholder("x", (3,), np.float64))
    # field-wise equality ignores non-equality tags
    noted = _my_lambda(x).copy(non_equality_tags=frozenset(
        {pt.tags.CreatedAt(pt.tags.CreationStack(()))}))
    assert noted == a and hash(noted) == hash(a)
    # the subclass survives tagging, copying mappers and pickling, and runs
    assert type(a.tagged(pt.tags.ImplStored())) is MyIndexLambda
    assert type(CopyMapper()(a + 1).bindings["_in0"]) is MyIndexLambda
    assert type(pickle.loads(pickle.dumps(a))) is MyIndexLambda
    assert pickle.loads(pickle.dumps(a)) == a
    xv = np.arange(3.0)
    np.testing.assert_array_equal(pt.generate_numpy(a + 1)(x=xv), 2 * xv + 1)


def test_every_node_class_takes_pytato_keywords():
    x = pt.make_placeholder("x", (4, 4), np.float64)
    xv = np.arange(16.0).reshape(4, 4)
    kw = {"tags": frozenset(), "non_equality_tags": frozenset()}
    nodes = {
        "reshape": (pt.Reshape(array=x, newshape=(16,), order="C",
                               axes=None, **kw), xv.reshape(16)),
        "perm": (pt.AxisPermutation(array=x, axis_permutation=(1, 0), **kw),
                 xv.T),
        "roll": (pt.Roll(array=x, shift=1, axis=0, **kw), np.roll(xv, 1, 0)),
        "concat": (pt.Concatenate(arrays=(x, x), axis=1, **kw),
                   np.concatenate([xv, xv], 1)),
        "stack": (pt.Stack(arrays=(x, x), axis=0, **kw), np.stack([xv, xv])),
        "index": (pt.BasicIndex(array=x, indices=(1, pt.NormalizedSlice(0, 4, 2)),
                                **kw), xv[1, ::2]),
        "einsum": (pt.Einsum(
            access_descriptors=((pt.EinsumElementwiseAxis(0),
                                 pt.EinsumReductionAxis(0)),),
            args=(x,),
            redn_axis_to_redn_descr={pt.EinsumReductionAxis(0):
                                     pt.ReductionDescriptor(frozenset())},
            **kw), xv.sum(1)),
    }
    for name, (node, expected) in nodes.items():
        np.testing.assert_array_equal(pt.generate_numpy(node)(x=xv), expected,
                                      err_msg=name)
    n = pt.SizeParam(name="n", tags=frozenset(), non_equality_tags=frozenset())
    assert n == pt.make_size_param("n")
    w = pt.DataWrapper(data=xv, shape=(4, 4), axes=None, **kw)
    np.testing.assert_array_equal(pt.generate_numpy(w + 0)(), xv)


class Diagonal(pt.Array):
    """A user node: the diagonal of a square array (not known to pytato_like's
    targets; users lower it with their own mapper)."""

    _mapper_method = "map_diagonal"
    _fields = (("array", ARRAY), ("offset", VALUE))

    @property
    def shape(self):
        return (self.array.shape[0] - self.offset,)

    @property
    def dtype(self):
        return self.array.dtype


class LowerDiagonal(CopyMapper):
    def map_diagonal(self, expr):
        ary = self.rec(expr.array)
        return pt.einsum("ii->i", ary[:ary.shape[0] - expr.offset,
                                      expr.offset:])


def test_array_subclass_with_declared_fields():
    x = pt.make_placeholder("x", (4, 4), np.float64)
    d = Diagonal(x, offset=1, tags=frozenset(), axes=None)
    assert d == Diagonal(array=x, offset=1) and hash(d) == hash(Diagonal(x, 1))
    assert d != Diagonal(x, 0)
    assert d.shape == (3,) and d.ndim == 1
    assert type(d.tagged(pt.tags.ImplStored())) is Diagonal
    assert pickle.loads(pickle.dumps(d)) == d
    assert pt.analysis.get_num_nodes(d + 1, count_duplicates=False) == 3

    visited = []

    class Visitor(WalkMapper):
        def map_diagonal(self, expr):
            visited.append(expr)
            self.rec(expr.array)

    Visitor()(d * 2)
    assert visited == [d]
    xv = np.arange(16.0).reshape(4, 4)
    lowered = LowerDiagonal()(d * 2)
    np.testing.assert_array_equal(pt.generate_numpy(lowered)(x=xv),
                                  2 * np.diagonal(xv, 1))
    with pytest.raises(diagnostic.NotAnArrayError, match="offset"):
        Diagonal(x)

# }}}


# {{{ size parameters as program inputs

def test_size_params_as_inputs():
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n, 2), np.float64)
    xv = np.arange(8.0).reshape(4, 2)
    prg = pt.generate_numpy(2 * x + n)
    np.testing.assert_array_equal(prg(x=xv), 2 * xv + 4)         # inferred
    np.testing.assert_array_equal(prg(x=xv, n=4), 2 * xv + 4)    # passed
    with pytest.raises(diagnostic.InputShapeMismatchError, match="'x'"):
        prg(x=xv, n=5)
    prg = pt.generate_numpy(pt.zeros((n,)) + pt.arange(3)[:1])
    np.testing.assert_array_equal(prg(n=3), np.zeros(3))
    with pytest.raises(diagnostic.MissingInputError, match="'n'"):
        prg()


def test_size_params_as_inputs_loopy(queue):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n, 2), np.float64)
    xv = np.arange(8.0).reshape(4, 2)
    prg = pt.generate_loopy(2 * x + n)
    _evt, (out,) = prg(queue, x=xv, n=4)
    np.testing.assert_array_equal(out, pt.generate_numpy(2 * x + n)(x=xv))
    prg = pt.generate_loopy(pt.zeros((n,)) + 1)
    _evt, (out,) = prg(queue, n=3)
    np.testing.assert_array_equal(np.asarray(out if isinstance(out, np.ndarray)
                                             else out.get()), np.ones(3))

# }}}


# {{{ pad

@pytest.mark.parametrize("pad_width", [
    2, (1, 2), [[1, 2]], ((1, 0), (0, 3)), [[1], [2]], np.array([[1, 2], [0, 3]]),
    np.array([1, 2]), np.int64(1), (np.int32(1), np.int32(2)), [3],
])
def test_pad_array_like_widths(pad_width):
    x = pt.make_placeholder("x", (3, 4), np.float64)
    xv = np.arange(12.0).reshape(3, 4)
    out = pt.generate_numpy(pt.pad(x, pad_width, constant_values=-1.5))(x=xv)
    np.testing.assert_array_equal(out, np.pad(xv, pad_width, constant_values=-1.5))


@pytest.mark.parametrize("constant_values", [
    7, (1, 2), [[1, 2], [3, 4]], np.array([[5], [6]]), np.array([9, 8]),
])
def test_pad_per_side_constants(constant_values):
    x = pt.make_placeholder("x", (3, 4), np.int32)
    xv = np.arange(12, dtype=np.int32).reshape(3, 4)
    pad_width = ((1, 2), (2, 1))
    out = pt.generate_numpy(pt.pad(x, pad_width, mode="constant",
                                   constant_values=constant_values))(x=xv)
    expected = np.pad(xv, pad_width, constant_values=constant_values)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)


def test_pad_errors():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    with pytest.raises(diagnostic.ShapeMismatchError, match="pad_width"):
        pt.pad(x, [[1, 2], [3, 4], [5, 6]])
    with pytest.raises(diagnostic.ShapeMismatchError, match="negative"):
        pt.pad(x, np.array([1, -1]))
    with pytest.raises(diagnostic.ShapeMismatchError, match="integers"):
        pt.pad(x, 1.5)
    with pytest.raises(diagnostic.ShapeMismatchError, match="lazy"):
        pt.pad(x, pt.make_placeholder("w", (2,), np.int64))
    with pytest.raises(NotImplementedError, match="median"):
        pt.pad(x, 1, mode="median")

# }}}
