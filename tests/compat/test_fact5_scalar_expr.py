"""Issue 9, fact 5 (``pytato.scalar_expr``): the pymbolic-based mapper
families over the scalar expressions inside index lambdas, including
:class:`~pytato_like.scalar_expr.Reduce` and
:class:`~pytato_like.scalar_expr.TypeCast`, checked against NumPy and
hand computations."""

import numpy as np
import pymbolic.primitives as prim
import pytest

import pytato_like as pt
from pytato_like import scalar_expr as se
from pytato_like.scalar_expr import (
    IDX_LAMBDA_AXIS_INDEX,
    IDX_LAMBDA_REDUCTION_AXIS_INDEX,
    INT_CLASSES,
    SCALAR_CLASSES,
    CombineMapper,
    DependencyMapper,
    EvaluationMapper,
    IdentityMapper,
    InductionVariableCollector,
    StringifyMapper,
    SubstitutionMapper,
    WalkMapper,
    distribute,
)


def _row_sums():
    """``sum(cast(x), axis=1) * 2`` on an int32 input: its lambdas hold a
    Reduce and (for the float result) a TypeCast."""
    x = pt.make_placeholder("x", (3, 4), np.int32)
    s = pt.sum(x, axis=1)
    return x, s, s * 2.5


def test_constants():
    assert IDX_LAMBDA_AXIS_INDEX.fullmatch("_12").group("index") == "12"
    assert not IDX_LAMBDA_AXIS_INDEX.fullmatch("_r0")
    assert not IDX_LAMBDA_AXIS_INDEX.fullmatch("_01")
    assert IDX_LAMBDA_REDUCTION_AXIS_INDEX.fullmatch("_r3").group("index") == "3"
    assert IDX_LAMBDA_REDUCTION_AXIS_INDEX.fullmatch("_3")
    assert isinstance(np.int8(1), INT_CLASSES) and not isinstance(1.0, INT_CLASSES)
    assert all(isinstance(v, SCALAR_CLASSES)
               for v in (1, 2.0, 1j, np.float32(1), np.bool_(True)))


def test_evaluation_mapper_matches_numpy_at_every_index():
    x, s, scaled = _row_sums()
    x_val = np.arange(12, dtype=np.int32).reshape(3, 4) - 5
    for i in range(3):
        ctx = {"_in0": x_val, "_0": i}
        assert EvaluationMapper(ctx)(s.expr) == x_val[i].sum()
        assert se.evaluate(s.expr, ctx) == x_val[i].sum()
    # the scaled lambda reads the sum through a cast to float64
    sums = x_val.sum(axis=1)
    for i in range(3):
        got = EvaluationMapper({"_in0": sums, "_0": i})(scaled.expr)
        assert got == pytest.approx(sums[i] * 2.5)


def test_dependency_mapper_and_induction_variables():
    _, s, scaled = _row_sums()
    names = {v.name for v in DependencyMapper()(s.expr)}
    assert names == {"_in0", "_0", "_r0"}
    no_idx = DependencyMapper(include_idx_lambda_indices=False)(s.expr)
    assert {v.name for v in no_idx} == {"_in0"}
    # free variables only: the reduction variable is bound by the Reduce
    assert se.get_dependencies(s.expr) == {"_in0", "_0"}
    assert InductionVariableCollector()(s.expr) == {"_r0"}
    assert InductionVariableCollector()(scaled.expr) == frozenset()


def test_combine_and_walk_mappers_see_reduce_and_cast():
    _, s, scaled = _row_sums()

    class CountSubscripts(CombineMapper[int, []]):
        def combine(self, values):
            return sum(values)

        def map_subscript(self, expr):
            return 1 + self.rec(expr.index)

        def map_variable(self, expr):
            return 0

        def map_constant(self, expr):
            return 0

    assert CountSubscripts()(s.expr) == 1
    assert CountSubscripts()(scaled.expr) == 1

    seen = []

    class Kinds(WalkMapper):
        def visit(self, expr):
            seen.append(type(expr).__name__)
            return True

    Kinds()(s.expr)
    assert seen[0] == "Reduce" and "Subscript" in seen


def test_identity_and_substitution_mappers_rebuild_reduce():
    _, s, _ = _row_sums()
    assert IdentityMapper()(s.expr) is s.expr
    from pymbolic.mapper.substitutor import make_subst_func
    renamed = SubstitutionMapper(
        make_subst_func({"_in0": prim.Variable("y")}))(s.expr)
    assert isinstance(renamed, se.Reduce)
    y_val = np.arange(8).reshape(2, 4)
    assert EvaluationMapper({"y": y_val, "_0": 1})(renamed) == y_val[1].sum()

    class Shift(IdentityMapper[[]]):
        def map_variable(self, expr):
            return expr + 1 if expr.name == "_0" else expr

    shifted = Shift()(s.expr)
    x_val = np.arange(12).reshape(3, 4)
    assert EvaluationMapper({"_in0": x_val, "_0": 0})(shifted) == x_val[1].sum()


def test_stringify_mapper():
    _, s, scaled = _row_sums()
    text = StringifyMapper()(s.expr)
    assert "_r0" in text and "_in0" in text and "sum" in text
    assert "cast(float64" in se.stringify(scaled.expr)
    assert str(s.expr) == text  # str() of our nodes uses this stringifier
    y = pt.sin(pt.make_placeholder("z", (2,)))
    assert se.stringify(y.expr).startswith("sin(")


def test_distribute_keeps_the_value():
    rng = np.random.default_rng(0)
    expr = se.parse("a*(b + c) - (a + 1)*(b - 2*c)")
    flat = distribute(expr)
    assert not any(isinstance(t, prim.Sum)
                   for p in flat.children if isinstance(p, prim.Product)
                   for t in p.children)
    for _ in range(5):
        ctx = dict(zip("abc", rng.standard_normal(3)))
        assert EvaluationMapper(ctx)(flat) == pytest.approx(
            EvaluationMapper(ctx)(expr))
    # a reduction's body is distributed in place
    red = se.make_reduce(se.parse("a*(b + _r0)"), pt.reductions.SumReductionOperation,
                         {"_r0": (0, 4)})
    assert EvaluationMapper({"a": 2, "b": 3})(distribute(red)) == \
        sum(2 * (3 + r) for r in range(4))


def test_distribute_over_a_product_with_a_reduction():
    red = se.make_reduce(se.parse("a*(b + _r0)"),
                         pt.reductions.SumReductionOperation, {"_r0": (0, 4)})
    expr = red * se.parse("q + 1")
    flat = distribute(expr)
    assert isinstance(flat, prim.Sum) and len(flat.children) == 2
    ctx = {"a": 2.0, "b": 3.0, "q": 5.0}
    assert EvaluationMapper(ctx)(flat) == pytest.approx(
        sum(2 * (3 + r) for r in range(4)) * 6)
    from pytato_like.scalar_expr import DistributeMapper, TermCollector
    assert isinstance(se.DistributeMapper(TermCollector()), DistributeMapper)
