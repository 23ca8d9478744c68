"""Issue 10, item 6: ``apply_distributive_property_to_einsums`` with
pytato's ``DoDistribute`` / ``DoNotDistribute`` answers; every rewrite is
checked structurally and against NumPy through the NumPy target."""

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.analysis import is_einsum_similar_to_subscript
from pytato_like.transform.einsum_distributive_law import (
    CannotDistributeError,
    DoDistribute,
    DoNotDistribute,
    EinsumDistributiveLawDescriptor,
    apply_distributive_property_to_einsums,
)


def _matvec_on_vector(expr):
    if is_einsum_similar_to_subscript(expr, "ij,j->i"):
        return DoDistribute(ioperand=1)
    return DoNotDistribute()


@pytest.fixture
def ops():
    A = pt.make_placeholder("A", (10, 4), np.float64)
    x1 = pt.make_placeholder("x1", 4, np.float64)
    x2 = pt.make_placeholder("x2", 4, np.float64)
    x3 = pt.make_placeholder("x3", 4, np.float64)
    return A, x1, x2, x3


@pytest.fixture
def values(rng):
    return {"A": rng.standard_normal((10, 4)), "x1": rng.standard_normal(4),
            "x2": rng.standard_normal(4), "x3": rng.standard_normal(4)}


def _run(expr, **values):
    """*expr* evaluated by the NumPy target on the inputs it reads."""
    names = {inp.name for inp in pt.transform.InputGatherer()(expr)}
    return pt.generate_numpy(expr)(
        **{k: v for k, v in values.items() if k in names})


def _einsums(expr):
    return [n for n in pt.transform.DependencyMapper()(expr)
            if isinstance(n, pt.Einsum)]


def test_answers_are_descriptors():
    assert isinstance(DoDistribute(1), EinsumDistributiveLawDescriptor)
    assert isinstance(DoNotDistribute(), EinsumDistributiveLawDescriptor)
    assert DoDistribute(ioperand=0) == DoDistribute(0)


def test_pytato_doc_example(ops, values):
    A, x1, x2, _ = ops
    y = A @ (x1 + x2)
    new = apply_distributive_property_to_einsums(y, _matvec_on_vector)
    assert new == A @ x1 + A @ x2
    a, v1, v2 = values["A"], values["x1"], values["x2"]
    np.testing.assert_allclose(_run(new, **values),
                               a @ v1 + a @ v2)


def test_nested_sums_differences_and_scalars(ops, values):
    A, x1, x2, x3 = ops
    y = A @ (2 * (x1 - x2) + x3 / 4)
    new = apply_distributive_property_to_einsums(y, _matvec_on_vector)
    # three products, one per input vector; no einsum reads a sum
    assert sorted(e.args[1].name for e in _einsums(new)) == ["x1", "x2", "x3"]
    a = values["A"]
    ref = a @ (2 * (values["x1"] - values["x2"]) + values["x3"] / 4)
    np.testing.assert_allclose(_run(new, **values), ref)


def test_do_not_distribute_keeps_einsum(ops):
    A, x1, x2, _ = ops
    y = A @ (x1 + x2)
    assert apply_distributive_property_to_einsums(
        y, lambda e: DoNotDistribute()) is y


def test_unsplittable_operands_stay_inside(ops, values):
    A, x1, x2, _ = ops
    # a product of two arrays and a broadcasting sum do not distribute
    y = A @ (x1 * x2) + A @ (x1 + 1.0)
    new = apply_distributive_property_to_einsums(y, _matvec_on_vector)
    assert len(_einsums(new)) == 2
    a, v1, v2 = values["A"], values["x1"], values["x2"]
    np.testing.assert_allclose(_run(new, **values),
                               a @ (v1 * v2) + a @ (v1 + 1.0))


def test_dtype_changing_sum_is_not_split(ops, rng):
    A, x1, _, _ = ops
    z = pt.make_placeholder("z", 4, np.float32)
    y = A @ (x1 + z)  # z is cast inside the sum: splitting would change dtypes
    new = apply_distributive_property_to_einsums(y, _matvec_on_vector)
    assert len(_einsums(new)) == 1
    assert new.dtype == y.dtype


def test_distributing_over_the_first_operand(ops, values):
    A, x1, _, _ = ops
    B = pt.make_placeholder("B", (10, 4), np.float64)
    y = pt.einsum("ij,j->i", A - 3 * B, x1)
    new = apply_distributive_property_to_einsums(
        y, lambda e: DoDistribute(ioperand=0))
    assert len(_einsums(new)) == 2
    b = np.arange(40.0).reshape(10, 4)
    np.testing.assert_allclose(
        _run(new, B=b, **values),
        (values["A"] - 3 * b) @ values["x1"])


def test_einsums_elsewhere_in_the_dag_are_rewritten_too(ops, values):
    A, x1, x2, x3 = ops
    y = pt.sin(A @ (x1 + x2)) + A @ x3
    new = apply_distributive_property_to_einsums(y, _matvec_on_vector)
    assert len(_einsums(new)) == 3
    a = values["A"]
    np.testing.assert_allclose(
        _run(new, **values),
        np.sin(a @ values["x1"] + a @ values["x2"]) + a @ values["x3"])


def test_composed_einsums_raise(ops):
    A, x1, x2, _ = ops
    inner = A.T @ (A @ (x1 + x2))
    with pytest.raises(CannotDistributeError, match="shape"):
        apply_distributive_property_to_einsums(
            inner, lambda e: DoDistribute(ioperand=1))


def test_bad_answers_raise(ops):
    A, x1, _, _ = ops
    with pytest.raises(CannotDistributeError, match="returned a str"):
        apply_distributive_property_to_einsums(A @ x1, lambda e: "yes")
    with pytest.raises(CannotDistributeError, match="ioperand=5"):
        apply_distributive_property_to_einsums(A @ x1,
                                               lambda e: DoDistribute(5))


def test_dict_of_named_arrays(ops, values):
    A, x1, x2, _ = ops
    result = pt.make_dict_of_named_arrays({"y": A @ (x1 + x2), "z": x1 * 2})
    new = apply_distributive_property_to_einsums(result, _matvec_on_vector)
    assert isinstance(new, pt.DictOfNamedArrays)
    assert new["z"].expr is result["z"].expr
    got = _run(new, **values)
    np.testing.assert_allclose(got["y"],
                               values["A"] @ (values["x1"] + values["x2"]))


def test_deep_sum_chain_distributes(rng):
    A = pt.make_placeholder("A", (5, 3), np.float64)
    x0 = pt.make_placeholder("x0", 3, np.float64)
    x = pt.make_placeholder("x", 3, np.float64)
    s = x0
    for _ in range(100_000):
        s = s + x
    new = apply_distributive_property_to_einsums(A @ s, _matvec_on_vector)
    # A @ x is built once and shared by every level: two einsums in all
    assert len(_einsums(new)) == 2
    a, v0, v = rng.standard_normal((5, 3)), rng.standard_normal(3), \
        rng.standard_normal(3)
    np.testing.assert_allclose(_run(new, A=a, x0=v0, x=v),
                               a @ v0 + 100_000 * (a @ v), rtol=1e-9)


def test_deep_chain_below_an_einsum(deep_chain, rng):
    x, y = deep_chain
    A = pt.make_placeholder("A", (2, 3), np.float64)
    new = apply_distributive_property_to_einsums(A @ y + A @ x,
                                                 _matvec_on_vector)
    a, v = rng.standard_normal((2, 3)), rng.standard_normal(3)
    # y = 0.5 y + 1 converges to 2 everywhere
    np.testing.assert_allclose(_run(new, A=a, x=v),
                               a @ np.full(3, 2.0) + a @ v)
