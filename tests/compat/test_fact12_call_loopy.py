"""Issue 34, item 5: ``pt.call_loopy(translation_unit, bindings,
entrypoint=None)`` as meshmode uses it.

* value (size) arguments the caller leaves unbound are solved for from the
  shapes of the bound arrays (meshmode's ``resample_by_picking`` kernel is
  called with its arrays only);
* a value argument may be bound to a ``SizeParam`` or a 0-d array;
* any kernel of a translation unit can be called by name, callees of the
  entrypoint are found through the unit's callables table.

Every result is computed by the NumPy target and by the loopy target and
compared with NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import diagnostic

lp = pytest.importorskip("loopy")

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")


def _both_targets(queue, result, **inputs):
    """*result* evaluated by the NumPy target and the loopy target."""
    by_numpy = pt.generate_numpy(result)(**inputs)
    _, (by_loopy,) = pt.generate_loopy(result)(queue, **inputs)
    return by_numpy, by_loopy


# {{{ meshmode-like: resample by picking

def _resample_by_picking():
    # meshmode's shape: sizes appear only in the arrays' shapes, arrays may
    # have offsets, inames are mapped to work-groups
    t_unit = lp.make_kernel(
        "{[iel, idof]: 0 <= iel < nelements and 0 <= idof < n_to_nodes}",
        "result[iel, idof] = ary[from_element_indices[iel], pick_list[idof]]",
        [lp.GlobalArg("result", None, shape="nelements, n_to_nodes",
                      offset=lp.auto, is_output=True),
         lp.GlobalArg("ary", None, shape="nelements_vec, n_from_nodes",
                      offset=lp.auto),
         lp.GlobalArg("from_element_indices", None, shape="nelements",
                      offset=lp.auto),
         lp.GlobalArg("pick_list", None, shape="n_to_nodes", offset=lp.auto),
         lp.ValueArg("nelements_vec", np.int32),
         lp.ValueArg("n_from_nodes", np.int32),
         "..."],
        name="resample_by_picking", lang_version=(2018, 2))
    return lp.tag_inames(t_unit, {"iel": "g.0", "idof": "l.0"})


def test_resample_by_picking_infers_its_sizes(queue):
    rng = np.random.default_rng(12)
    t_unit = _resample_by_picking()
    ary_v = rng.standard_normal((9, 6))
    ary = pt.make_placeholder("ary", (9, 6), np.float64)
    groups = [(np.array([8, 0, 3, 3, 5], np.int32), np.array([5, 0, 2], np.int32)),
              (np.array([1, 2], np.int32), np.array([4, 4, 1, 0], np.int32))]
    results, refs = {}, {}
    for i, (from_el, picks) in enumerate(groups):
        call = pt.call_loopy(t_unit, {
            "ary": 2 * ary,
            "from_element_indices": pt.make_data_wrapper(from_el),
            "pick_list": pt.make_data_wrapper(picks)})
        assert dict(call.scalar_bindings) == {
            "nelements": len(from_el), "n_to_nodes": len(picks),
            "nelements_vec": 9, "n_from_nodes": 6}
        result = call["result"]
        assert result.shape == (len(from_el), len(picks))
        assert result.dtype == np.float64
        results[f"g{i}"] = result + 1
        refs[f"g{i}"] = 2 * ary_v[from_el][:, picks] + 1
    outputs = pt.make_dict_of_named_arrays(results)
    by_numpy = pt.generate_numpy(outputs)(ary=ary_v)
    _, by_loopy = pt.generate_loopy(outputs)(queue, ary=ary_v)
    for name, ref in refs.items():
        np.testing.assert_array_equal(by_numpy[name], ref)
        np.testing.assert_array_equal(by_loopy[name], ref)


def test_resample_by_picking_with_bound_sizes_matches(queue):
    # binding the sizes by hand gives the same call
    t_unit = _resample_by_picking()
    ary = pt.make_placeholder("ary", (4, 3), np.float64)
    from_el = pt.make_data_wrapper(np.array([3, 1], np.int32))
    picks = pt.make_data_wrapper(np.array([2, 2, 0], np.int32))
    inferred = pt.call_loopy(t_unit, {"ary": ary, "from_element_indices": from_el,
                                      "pick_list": picks})
    bound = pt.call_loopy(t_unit, {"ary": ary, "from_element_indices": from_el,
                                   "pick_list": picks, "nelements": 2,
                                   "n_to_nodes": 3, "nelements_vec": 4,
                                   "n_from_nodes": 3})
    assert inferred["result"] == bound["result"]
    av = np.arange(12.0).reshape(4, 3)
    for got in _both_targets(queue, inferred["result"], ary=av):
        np.testing.assert_array_equal(got, av[[3, 1]][:, [2, 2, 0]])

# }}}


# {{{ solving for sizes

def test_affine_shapes_are_solved_together(queue):
    # x: (2n + 3m + 2, 6n + 4m + 3); n and m appear in no shape alone
    knl = lp.make_kernel(
        "{[i, j]: 0 <= i < 2*n + 3*m + 2 and 0 <= j < 6*n + 4*m + 3}",
        "out[i] = sum(j, x[i, j])",
        [lp.GlobalArg("x", np.float64, shape="(2*n + 3*m + 2, 6*n + 4*m + 3)"),
         lp.GlobalArg("out", np.float64, shape="2*n + 3*m + 2",
                      is_output=True),
         lp.ValueArg("n", np.int64), lp.ValueArg("m", np.int64)],
        name="row_sums", lang_version=(2018, 2))
    x = pt.make_placeholder("x", (20, 37), np.float64)
    call = pt.call_loopy(knl, {"x": x})
    assert dict(call.scalar_bindings) == {"n": 3, "m": 4}
    xv = np.random.default_rng(2).standard_normal((20, 37))
    for got in _both_targets(queue, call["out"], x=xv):
        np.testing.assert_allclose(got, xv.sum(axis=1), rtol=1e-13)


def test_a_multiple_in_a_shape(queue):
    knl = lp.make_kernel(
        "{[i]: 0 <= i < n}", "y[i] = x[2*i] + x[2*i + 1]",
        [lp.GlobalArg("x", np.float64, shape="2*n"),
         lp.GlobalArg("y", np.float64, shape="n", is_output=True),
         lp.ValueArg("n", np.int64)],
        name="pair_sums", lang_version=(2018, 2))
    x = pt.make_placeholder("x", (10,), np.float64)
    call = pt.call_loopy(knl, {"x": x})
    assert call.scalar_bindings["n"] == 5
    xv = np.arange(10.0)
    for got in _both_targets(queue, call["y"], x=xv):
        np.testing.assert_array_equal(got, xv[0::2] + xv[1::2])


def test_sizes_that_do_not_follow_raise_typed_errors():
    knl = lp.make_kernel(
        "{[i]: 0 <= i < n + m}", "y[i] = x[i]",
        [lp.GlobalArg("x", np.float64, shape="n + m"),
         lp.GlobalArg("y", np.float64, shape="n + m", is_output=True),
         lp.ValueArg("n", np.int64), lp.ValueArg("m", np.int64)],
        name="ambiguous", lang_version=(2018, 2))
    x = pt.make_placeholder("x", (6,), np.float64)
    with pytest.raises(diagnostic.MissingInputError,
                       match=r"'ambiguous'.*'[nm]'.*not bound"):
        pt.call_loopy(knl, {"x": x})
    # one bound, the other follows
    assert pt.call_loopy(knl, {"x": x, "n": 2}).scalar_bindings["m"] == 4

    two = lp.make_kernel(
        "{[i]: 0 <= i < n}", "y[i] = x[i] + z[i]",
        [lp.GlobalArg("x", np.float64, shape="n"),
         lp.GlobalArg("z", np.float64, shape="n"),
         lp.GlobalArg("y", np.float64, shape="n", is_output=True),
         lp.ValueArg("n", np.int64)],
        name="add", lang_version=(2018, 2))
    z = pt.make_placeholder("z", (5,), np.float64)
    with pytest.raises(diagnostic.ShapeMismatchError, match=r"'(x|z)'.*'add'"):
        pt.call_loopy(two, {"x": x, "z": z})
    affine = lp.make_kernel(
        "{[i]: 0 <= i < 2*n}", "y[i] = x[i]",
        [lp.GlobalArg("x", np.float64, shape="2*n"),
         lp.GlobalArg("y", np.float64, shape="2*n", is_output=True),
         lp.ValueArg("n", np.int64)],
        name="even", lang_version=(2018, 2))
    with pytest.raises(diagnostic.ShapeMismatchError, match="'even'.*'x'"):
        pt.call_loopy(affine, {"x": pt.make_placeholder("x", (7,), np.float64)})
    halves = lp.make_kernel(
        "{[i]: 0 <= i < m // 2 + 1}", "y[i] = x[i]",
        [lp.GlobalArg("x", np.float64, shape="m // 2 + 1"),
         lp.GlobalArg("y", np.float64, shape="m // 2 + 1", is_output=True),
         lp.ValueArg("m", np.int64)],
        name="halves", lang_version=(2018, 2))
    x3 = pt.make_placeholder("x3", (3,), np.float64)
    with pytest.raises(diagnostic.MissingInputError, match="'halves'.*'m'"):
        pt.call_loopy(halves, {"x": x3})          # m is 4 or 5
    assert pt.call_loopy(halves, {"x": x3, "m": 5})["y"].shape == (3,)

# }}}


# {{{ size parameters and 0-d arrays as value arguments

def _affine():
    return lp.make_kernel(
        "{[i]: 0 <= i < n}", "y[i] = alpha * x[i] + 1",
        [lp.GlobalArg("x", None, shape="n"),
         lp.GlobalArg("y", None, shape="n", is_output=True),
         lp.ValueArg("alpha", None), lp.ValueArg("n", np.int32)],
        name="affine", lang_version=(2018, 2))


def test_size_param_and_computed_scalar_bindings(queue):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,), np.float64)
    call = pt.call_loopy(_affine(), {"x": x, "n": n, "alpha": pt.sum(x)})
    assert call["y"].shape == (n,)
    xv = np.linspace(-1, 1, 7)
    ref = xv.sum() * xv + 1
    for got in _both_targets(queue, 2 * call["y"], x=xv):
        np.testing.assert_allclose(got, 2 * ref, rtol=1e-14)
    # the size parameter given explicitly
    _, (got,) = pt.generate_loopy(call["y"])(queue, x=xv, n=7)
    np.testing.assert_allclose(got, ref, rtol=1e-14)


def test_size_inferred_from_a_symbolic_shape(queue):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n,), np.float64)
    call = pt.call_loopy(_affine(), {"x": x, "alpha": np.array(0.5)})
    assert call["y"].shape == (n,)
    assert call.scalar_bindings["alpha"] == 0.5
    xv = np.arange(4.0)
    for got in _both_targets(queue, call["y"], x=xv):
        np.testing.assert_allclose(got, 0.5 * xv + 1, rtol=1e-15)


def test_scalar_bindings_must_be_scalars():
    x = pt.make_placeholder("x", (3,), np.float64)
    with pytest.raises(diagnostic.DTypeError, match="'alpha'.*'affine'"):
        pt.call_loopy(_affine(), {"x": x, "alpha": x})
    with pytest.raises(diagnostic.DTypeError, match="'alpha'"):
        pt.call_loopy(_affine(), {"x": x, "alpha": "two"})
    # a data-dependent size cannot size an output
    k = pt.make_placeholder("k", (), np.int32)
    x_k = pt.make_placeholder("x_k", (3,), np.float64)
    with pytest.raises(diagnostic.ShapeMismatchError, match="output 'y'"):
        pt.call_loopy(_affine(), {"x": x_k, "alpha": 1.0, "n": k})

# }}}


# {{{ several kernels in one translation unit

def _unit_with_a_callee():
    flip = lp.make_function(
        "{[i]: 0 <= i < 4}", "b[i] = 2*a[i] + a[3 - i]",
        name="flip_blend", lang_version=(2018, 2))
    caller = lp.make_kernel(
        "{[e, j]: 0 <= e < nel and 0 <= j < 4}",
        "[j]: y[e, j] = flip_blend([j]: x[e, j])",
        [lp.GlobalArg("x", None, shape="nel, 4"),
         lp.GlobalArg("y", None, shape="nel, 4", is_output=True),
         lp.ValueArg("nel", np.int32)],
        name="rows", lang_version=(2018, 2))
    caller = lp.tag_inames(caller, {"e": "g.0"})
    return lp.merge([caller, flip])


def test_entrypoint_calling_a_callee(queue):
    t_unit = _unit_with_a_callee()
    x = pt.make_placeholder("x", (5, 4), np.float64)
    call = pt.call_loopy(t_unit, {"x": x + 1})     # the one entrypoint
    assert call.entrypoint == "rows"
    assert call.scalar_bindings["nel"] == 5
    xv = np.random.default_rng(5).standard_normal((5, 4))
    ref = 2 * (xv + 1) + (xv + 1)[:, ::-1]
    for got in _both_targets(queue, call["y"], x=xv):
        np.testing.assert_allclose(got, ref, rtol=1e-14)


def test_callee_called_by_name(queue):
    t_unit = _unit_with_a_callee()
    x = pt.make_placeholder("x", (4,), np.float64)
    call = pt.call_loopy(t_unit, {"a": x}, entrypoint="flip_blend")
    assert call.translation_unit.entrypoints == frozenset(["flip_blend"])
    assert call["b"].shape == (4,)
    xv = np.array([1.0, 2.0, 3.0, 5.0])
    for got in _both_targets(queue, call["b"], x=xv):
        np.testing.assert_array_equal(got, 2 * xv + xv[::-1])


def test_several_entrypoints(queue):
    scale = lp.make_kernel(
        "{[i]: 0 <= i < n}", "y[i] = 3 * x[i]",
        [lp.GlobalArg("x", np.float64, shape="n"),
         lp.GlobalArg("y", np.float64, shape="n", is_output=True), "..."],
        name="scale", lang_version=(2018, 2))
    shift = lp.make_kernel(
        "{[i]: 0 <= i < n}", "y[i] = x[i] - 1",
        [lp.GlobalArg("x", np.float64, shape="n"),
         lp.GlobalArg("y", np.float64, shape="n", is_output=True), "..."],
        name="shift", lang_version=(2018, 2))
    t_unit = lp.merge([scale, shift])
    x = pt.make_placeholder("x", (3,), np.float64)
    with pytest.raises(diagnostic.UnexpectedInputError,
                       match=r"\['scale', 'shift'\]"):
        pt.call_loopy(t_unit, {"x": x})
    with pytest.raises(diagnostic.MissingInputError, match="'stretch'.*shift"):
        pt.call_loopy(t_unit, {"x": x}, entrypoint="stretch")
    y = pt.call_loopy(t_unit, {"x": x}, entrypoint="shift")["y"]
    z = pt.call_loopy(t_unit, {"x": y}, entrypoint="scale")["y"]
    xv = np.array([1.0, 4.0, -2.0])
    for got in _both_targets(queue, z, x=xv):
        np.testing.assert_array_equal(got, 3 * (xv - 1))

# }}}


def test_unpickled_call_runs_on_both_targets(queue):
    import pickle
    knl = lp.make_kernel(
        "{[i, j]: 0 <= i < m and 0 <= j < k}",
        "s[i] = sum(j, sin(a[i, j]) * exp(a[i, j]))",
        [lp.GlobalArg("a", None, shape="m, k"),
         lp.GlobalArg("s", None, shape="m", is_output=True), "..."],
        name="row_reduce", lang_version=(2018, 2))
    a = pt.make_placeholder("a", (3, 5), np.float64)
    result = pickle.loads(pickle.dumps(pt.call_loopy(knl, {"a": a})["s"] + 1))
    av = np.random.default_rng(9).standard_normal((3, 5))
    for got in _both_targets(queue, result, a=av):
        np.testing.assert_allclose(got, (np.sin(av) * np.exp(av)).sum(1) + 1,
                                   rtol=1e-13)
