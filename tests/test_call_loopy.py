"""Hand-written loopy kernels as DAG nodes (``call_loopy``), checked against
the same computation written with NumPy."""

from __future__ import annotations

import pickle

import loopy as lp
import numpy as np
import pytest

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.loopy import LoopyCall, LoopyCallResult, call_loopy


def _axpy_and_square():
    return lp.make_kernel(
        "{[i]: 0 <= i < n}",
        """
        y[i] = alpha * x[i] + z[i]
        sq[i] = x[i] * x[i]
        """,
        [lp.GlobalArg("x", shape="n"), lp.GlobalArg("z", shape="n"),
         lp.GlobalArg("y", shape="n", is_output=True),
         lp.GlobalArg("sq", shape="n", is_output=True),
         lp.ValueArg("alpha"), lp.ValueArg("n", np.int64)],
        name="axpy", lang_version=(2018, 2))


def _row_sums():
    return lp.make_kernel(
        "{[i, j]: 0 <= i < m and 0 <= j < k}",
        "s[i] = sum(j, a[i, j])",
        [lp.GlobalArg("a", np.float64, shape=("m", "k")),
         lp.GlobalArg("s", np.float64, shape=("m",), is_output=True),
         lp.ValueArg("m", np.int64), lp.ValueArg("k", np.int64)],
        name="row_sums", lang_version=(2018, 2))


def test_kernel_results_feed_the_rest_of_the_dag(queue):
    rng = np.random.default_rng(4)
    xv, zv = rng.standard_normal(40), rng.standard_normal(40)
    x = pt.make_placeholder("x", (40,), np.float64)
    z = pt.make_placeholder("z", (40,), np.float64)
    call = call_loopy(_axpy_and_square(),
                      {"x": pt.sin(x), "z": z + 1, "alpha": 3.0, "n": 40})
    assert isinstance(call, LoopyCall) and set(call) == {"y", "sq"}
    y, sq = call["y"], call["sq"]
    assert isinstance(y, LoopyCallResult)
    assert y.shape == (40,) and y.dtype == np.float64
    out = pt.make_dict_of_named_arrays({"r": y - sq, "y": y})
    _, got = pt.generate_loopy(out)(queue, x=xv, z=zv)
    ref_y = 3.0 * np.sin(xv) + zv + 1
    np.testing.assert_allclose(got["y"], ref_y, rtol=1e-13)
    np.testing.assert_allclose(got["r"], ref_y - np.sin(xv) ** 2, rtol=1e-13)


def test_two_dimensional_kernel_and_chained_calls(queue):
    rng = np.random.default_rng(8)
    av = rng.standard_normal((6, 5))
    a = pt.make_placeholder("a", (6, 5), np.float64)
    s1 = call_loopy(_row_sums(), {"a": a, "m": 6, "k": 5})["s"]
    # the result of one kernel is the input of the next
    s2 = call_loopy(_row_sums(), {"a": pt.reshape(s1 * 2, (2, 3)),
                                  "m": 2, "k": 3})["s"]
    _, (got,) = pt.generate_loopy(s2 + 1)(queue, a=av)
    np.testing.assert_allclose(got, (2 * av.sum(axis=1)).reshape(2, 3).sum(1)
                               + 1, rtol=1e-13)


def test_numpy_target_runs_the_kernel_on_the_host():
    x = pt.make_placeholder("x", (4,), np.float64)
    call = call_loopy(_axpy_and_square(), {"x": x, "z": x, "alpha": 1.5, "n": 4})
    xv = np.array([1.0, -2.0, 0.5, 3.0])
    got = pt.generate_numpy(pt.make_dict_of_named_arrays(
        {"y": call["y"], "sq": call["sq"] - 1}))(x=xv)
    np.testing.assert_allclose(got["y"], 2.5 * xv, rtol=1e-15)
    np.testing.assert_allclose(got["sq"], xv * xv - 1, rtol=1e-15)


def test_numpy_target_refuses_what_plain_c_cannot_express():
    # vector-typed array axes exist in OpenCL only
    knl = lp.make_kernel(
        "{[i, j]: 0 <= i < 4 and 0 <= j < 4}", "y[i, j] = 2 * x[i, j]",
        [lp.GlobalArg("x", np.float32, shape=(4, 4)),
         lp.GlobalArg("y", np.float32, shape=(4, 4), is_output=True)],
        name="vectors", lang_version=(2018, 2))
    knl = lp.tag_inames(lp.tag_array_axes(knl, "x,y", "c,vec"), {"j": "vec"})
    x = pt.make_placeholder("x", (4, 4), np.float32)
    call = call_loopy(knl, {"x": x})
    with pytest.raises(diagnostic.UnsupportedArrayError, match="vectors"):
        pt.generate_numpy(call["y"])(x=np.ones((4, 4), np.float32))


def test_bad_bindings_raise_typed_errors():
    x = pt.make_placeholder("x", (4,), np.float64)
    knl = _axpy_and_square()
    with pytest.raises(diagnostic.MissingInputError, match="'z'"):
        call_loopy(knl, {"x": x, "alpha": 1.0, "n": 4})
    with pytest.raises(diagnostic.UnexpectedInputError, match="output"):
        call_loopy(knl, {"x": x, "z": x, "y": x, "alpha": 1.0, "n": 4})
    with pytest.raises(diagnostic.UnexpectedInputError, match="'w'"):
        call_loopy(knl, {"x": x, "z": x, "w": x, "alpha": 1.0, "n": 4})
    with pytest.raises(diagnostic.DTypeError, match="alpha"):
        call_loopy(knl, {"x": x, "z": x, "alpha": x, "n": 4})
    with pytest.raises(diagnostic.NotAnArrayError, match="'x'"):
        call_loopy(knl, {"x": np.ones(4), "z": x, "alpha": 1.0, "n": 4})
    with pytest.raises(diagnostic.ShapeMismatchError, match=r"\(5,\)"):
        call_loopy(knl, {"x": x, "z": x, "alpha": 1.0, "n": 5})
    inplace = lp.make_kernel("{[i]: 0 <= i < 4}", "x[i] = 2 * x[i]",
                             [lp.GlobalArg("x", np.float64, shape=(4,))],
                             lang_version=(2018, 2))
    with pytest.raises(diagnostic.UnexpectedInputError, match="in place"):
        call_loopy(inplace, {"x": x})
    with pytest.raises(diagnostic.MissingInputError, match="nope"):
        call_loopy(knl, {"x": x}, entrypoint="nope")


def test_equality_pickling_mappers_and_drawing():
    x = pt.make_placeholder("x", (4,), np.float64)
    knl = _axpy_and_square()
    c1 = call_loopy(knl, {"x": x, "z": x, "alpha": 2.0, "n": 4})
    c2 = call_loopy(knl, {"x": x, "z": x, "alpha": 2.0, "n": 4})
    c3 = call_loopy(knl, {"x": x, "z": x, "alpha": 3.0, "n": 4})
    assert c1["y"] == c2["y"] and c1["y"] != c3["y"]
    back = pickle.loads(pickle.dumps(c1["y"] + 1))
    assert back == c1["y"] + 1
    assert {d.name for d in pt.transform.InputGatherer()(c1["y"])} == {"x"}

    class Renamer(pt.transform.CopyMapper):
        def map_placeholder(self, expr):
            return pt.make_placeholder("w", expr.shape, expr.dtype)

    renamed = Renamer()(c1["y"])
    assert isinstance(renamed, LoopyCallResult)
    assert {d.name for d in pt.transform.InputGatherer()(renamed)} == {"w"}
    assert "LoopyCall" in pt.get_dot_graph(c1["sq"])


def test_deep_dag_into_a_loopy_call(deep_chain, queue):
    x, y = deep_chain                    # (3,), 100 000 updates deep
    call = call_loopy(_axpy_and_square(), {"x": y, "z": y, "alpha": 2.0, "n": 3})
    out = call["y"]
    assert pickle.loads(pickle.dumps(out)) == out
    assert pt.transform.CopyMapper()(out) is out
    assert {d.name for d in pt.transform.InputGatherer()(out)} == {"x"}


def _affine():
    return lp.make_kernel(
        "{[i]: 0 <= i < n}", "y[i] = alpha * x[i] + 1",
        [lp.GlobalArg("x", np.float64, shape="n"),
         lp.GlobalArg("y", np.float64, shape="n", is_output=True),
         lp.ValueArg("alpha", np.float64), lp.ValueArg("n", np.int64)],
        name="affine", lang_version=(2018, 2))


def test_chain_of_50_000_calls_through_every_mapper():
    """``y <- affine(y)`` 50 000 times: depth 100 000 (a call and its
    result per step), so each mapper's loopy-call methods run at full
    depth."""
    from _every_mapper import run_every_mapper
    knl = _affine()
    x = pt.make_placeholder("x", (3,), np.float64)
    y = x
    for _ in range(50_000):
        y = call_loopy(knl, {"x": y, "alpha": 0.5, "n": 3})["y"]
    run_every_mapper(y, LoopyCallResult, 50_000, {"x"})
    assert sum(isinstance(n, LoopyCall) for n in
               pt.transform.DependencyMapper()(y)) == 50_000


def test_chain_of_calls_matches_numpy(queue):
    knl = _affine()
    xv = np.array([1.0, -2.0, 3.0])
    x = pt.make_placeholder("x", (3,), np.float64)
    y, ref = x, xv
    for k in range(12):
        y = call_loopy(knl, {"x": y, "alpha": 0.5 + k, "n": 3})["y"]
        ref = (0.5 + k) * ref + 1
    _, (got,) = pt.generate_loopy(y * 2)(queue, x=xv)
    np.testing.assert_allclose(got, 2 * ref, rtol=1e-13)
