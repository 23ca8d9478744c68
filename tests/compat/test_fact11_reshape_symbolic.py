"""Issue 34, item 7: ``reshape`` with ``-1`` on symbolic shapes, as pytato
programs write it (pytato's advection example flattens with
``reshape(-1)``). The inferred length is an expression of the size
parameters; evaluated on the NumPy target for concrete sizes, results equal
NumPy's reshape of the same data. Lengths that are not a multiple for every
value of the size parameters raise a typed error naming the shapes."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.array import Array
from pytato_like.diagnostic import ShapeMismatchError
from pytato_like.utils import are_shape_components_equal, size_polynomial

N = pt.make_size_param("n")
M = pt.make_size_param("m")


def _concrete(spec, values):
    """*spec* with the size parameters replaced by their values."""
    return tuple(values[d.name] if isinstance(d, Array) else d for d in spec)


# {{{ (n, 3)

SPECS_2D = [(-1,), (-1, 3), (N, -1), (3, -1), (-1, N), (1, -1, 3), (-1, 1),
            (3, 1, -1)]


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("spec", SPECS_2D, ids=str)
@pytest.mark.parametrize("n", [1, 4, 7])
def test_reshape_minus_one_of_n_by_3(spec, order, n):
    x = pt.make_placeholder("x", (N, 3), np.float64)
    y = x.reshape(*spec, order=order)
    assert y.ndim == len(spec)
    xv = np.arange(3.0 * n).reshape(n, 3) * 1.5
    expected = xv.reshape(_concrete(spec, {"n": n}), order=order)
    out = pt.generate_numpy(y)(x=xv)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out, expected)


def test_inferred_lengths_are_expressions_of_the_size_parameters():
    x = pt.make_placeholder("x", (N, 3), np.float64)
    (flat,) = x.reshape(-1).shape
    assert size_polynomial(flat) == {(("n", 1),): 3}          # 3*n
    assert x.reshape(-1, 3) is x                               # (n, 3) again
    assert x.reshape(N, -1).shape[1] == 3
    assert x.reshape(3, -1).shape[1] is N
    assert x.reshape(-1, N).shape[0] == 3
    # NumPy's ravel/flatten go through the same inference
    assert are_shape_components_equal(x.ravel().shape[0], 3 * N)
    assert are_shape_components_equal(x.flatten().shape[0], N * 3)

# }}}


# {{{ two size parameters and compound lengths

SPECS_3D = [(-1,), (-1, 2), (N, -1), (M, -1), (-1, N), (2, -1), (N, M, -1),
            (-1, M, N), (M, -1, N), (2, N, -1)]


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("spec", SPECS_3D, ids=str)
def test_reshape_minus_one_of_n_by_m_by_2(spec, order):
    w = pt.make_placeholder("w", (N, M, 2), np.int32)
    y = w.reshape(spec, order=order)
    wv = np.arange(5 * 3 * 2, dtype=np.int32).reshape(5, 3, 2)
    expected = wv.reshape(_concrete(spec, {"n": 5, "m": 3}), order=order)
    out = pt.generate_numpy(y)(w=wv)
    assert out.shape == expected.shape and out.dtype == np.int32
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(("shape", "spec", "expected_poly"), [
    ((2 * N, 3), (-1, 6), {(("n", 1),): 1}),                  # n
    ((N + 1, 4), (N + 1, -1), {(): 4}),                        # 4
    ((N + 1, 4), (-1, 2), {(("n", 1),): 2, (): 2}),            # 2n + 2
    ((N * N, 2), (N, -1), {(("n", 1),): 2}),                   # 2n
    ((N, 6), (-1, 4, N), None),                                # not inferable
    ((4 * N * M,), (2 * M, -1), {(("n", 1),): 2}),             # 2n
])
def test_compound_lengths(shape, spec, expected_poly):
    x = pt.make_placeholder("x", shape, np.float64)
    if expected_poly is None:
        with pytest.raises(ShapeMismatchError):
            x.reshape(spec)
        return
    y = x.reshape(spec)
    inferred = y.shape[list(spec).index(-1)]
    assert size_polynomial(inferred) == expected_poly
    values = {"n": 3, "m": 2}
    xv = np.arange(float(np.prod(_evaluate(shape, values)))).reshape(
        _evaluate(shape, values))
    out = pt.generate_numpy(y)(x=xv, **{k: v for k, v in values.items()
                                        if _uses(shape, k)})
    np.testing.assert_array_equal(out, xv.reshape(_evaluate(spec, values)))


def _evaluate(spec, values):
    from pymbolic.mapper.evaluator import EvaluationMapper

    from pytato_like.utils import dim_to_index_lambda_components
    result = []
    for d in spec:
        if isinstance(d, Array):
            expr, bindings = dim_to_index_lambda_components(d)
            d = EvaluationMapper({k: values[sp.name]
                                  for k, sp in bindings.items()})(expr)
        result.append(int(d))
    return tuple(result)


def _uses(shape, name):
    params: dict = {}
    for d in shape:
        size_polynomial(d, params)
    return name in params

# }}}


def test_flatten_in_a_program_as_pytato_examples_do():
    # pytato's advection example flattens a field of symbolic shape
    u = pt.make_placeholder("u", (N, 4), np.float64)
    flat = u.reshape(-1)
    energy = pt.sum(flat * flat)
    back = (2 * flat + 1).reshape(N, 4)
    prg = pt.generate_numpy(pt.make_dict_of_named_arrays(
        {"energy": energy, "back": back, "flat": flat}))
    uv = np.linspace(-1, 1, 24).reshape(6, 4)
    out = prg(u=uv)
    np.testing.assert_allclose(out["energy"], np.sum(uv.reshape(-1) ** 2),
                               rtol=1e-14)
    np.testing.assert_array_equal(out["back"], 2 * uv + 1)
    np.testing.assert_array_equal(out["flat"], uv.reshape(-1))


@pytest.mark.parametrize(("shape", "spec", "words"), [
    ((N, 3), (-1, 2), ["(n, 3)", "(-1, 2)", "3*n", "multiple of 2"]),
    ((N, 3), (M, -1), ["(n, 3)", "(m, -1)", "multiple of m"]),
    ((N + 1,), (2, -1), ["(n + 1,)", "(2, -1)"]),
    ((N, 3), (0, -1), ["(n, 3)", "(0, -1)"]),
    ((N, 3), (-1, -1), ["only infer one"]),
])
def test_not_inferable_raises_a_typed_error_naming_the_shapes(
        shape, spec, words):
    x = pt.make_placeholder("x", shape, np.float64)
    with pytest.raises(ShapeMismatchError) as info:
        x.reshape(spec)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_different_size_parameters_are_different_lengths():
    assert not are_shape_components_equal(N, M)
    assert are_shape_components_equal(N * M, M * N)
    assert are_shape_components_equal(N + N + N, 3 * N)
    assert not are_shape_components_equal(N + 1, N)


def test_deep_size_expression():
    # a length built by 100 000 operations, at the default recursion limit:
    # the inference and the comparison walk it iteratively
    s = N
    for _ in range(100_000):
        s = s + 1
    s = s - 100_000
    assert are_shape_components_equal(s, N)
    x = pt.make_placeholder("x", (s, 3), np.float64)
    assert x.reshape(N, -1).shape[1] == 3
    flat = x.reshape(-1)
    assert size_polynomial(flat.shape[0]) == {(("n", 1),): 3}
    xv = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(pt.generate_numpy(flat)(x=xv, n=4),
                                  xv.reshape(-1))
