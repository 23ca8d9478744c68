"""Issue 9, fact 5 (``pytato.codegen``): ``normalize_outputs``,
``preprocess`` and ``CodeGenPreprocessor`` used as pytato's code
generators and users use them; the preprocessed DAG is evaluated with the
NumPy target (bound arguments passed as inputs) and compared with the
original."""

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.codegen import (
    CodeGenPreprocessor,
    PreprocessResult,
    normalize_outputs,
    preprocess,
)


def _program():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    w = pt.make_data_wrapper(np.linspace(0.0, 1.0, 4))
    a = (x + w).T                      # AxisPermutation
    b = pt.sum(a, axis=0) * 2          # reads output a
    c = pt.concatenate([b, pt.roll(b, 1)])  # reads output b
    return x, w, pt.make_dict_of_named_arrays({"c": c, "a": a, "b": b})


def test_normalize_outputs():
    x = pt.make_placeholder("x", (2,), np.float64)
    single = normalize_outputs(x + 1)
    assert isinstance(single, pt.DictOfNamedArrays)
    assert list(single) == ["_pt_out"] and single["_pt_out"].expr == x + 1
    from_dict = normalize_outputs({"u": x, "v": 2 * x})
    assert sorted(from_dict) == ["u", "v"]
    dona = pt.make_dict_of_named_arrays({"u": x})
    assert normalize_outputs(dona) is dona
    with pytest.raises(diagnostic.NotAnArrayError):
        normalize_outputs(3.0)


def test_preprocess_lowers_binds_and_orders():
    x, w, outputs = _program()
    result = preprocess(outputs, pt.NumpyTarget())
    assert isinstance(result, PreprocessResult)
    # a before b before c: each output reads the previous one
    assert result.compute_order == ("a", "b", "c")
    kinds = {type(n).__name__
             for n in pt.transform.DependencyMapper()(result.outputs)}
    assert kinds <= {"IndexLambda", "Placeholder"}
    (name, data), = result.bound_arguments.items()
    assert data is w.data
    x_val = np.arange(12.0).reshape(3, 4)
    ref = pt.generate_numpy(outputs)(x=x_val)
    got = pt.generate_numpy(result.outputs)(x=x_val, **{name: data})
    for out in ("a", "b", "c"):
        np.testing.assert_allclose(got[out], ref[out])


def test_preprocess_rejects_clashing_input_names():
    x1 = pt.make_placeholder("x", (2,), np.float64)
    x2 = pt.make_placeholder("x", (3,), np.float64)
    with pytest.raises(diagnostic.NameClashError, match="'x'"):
        preprocess(pt.make_dict_of_named_arrays(
            {"o": x1.sum() + x2.sum()}), None)


def test_code_gen_preprocessor_subclass():
    x = pt.make_placeholder("x", (2, 2), np.float64)
    data = np.eye(2)
    named = pt.make_data_wrapper(data, name="ident")

    class Counting(CodeGenPreprocessor):
        def __init__(self, target):
            super().__init__(target)
            self.einsums = 0

        def map_einsum(self, expr):
            self.einsums += 1
            return super().map_einsum(expr)

    mapper = Counting(pt.NumpyTarget())
    lowered = mapper(x @ named + pt.make_data_wrapper(data))
    assert mapper.einsums == 1
    assert isinstance(lowered, pt.IndexLambda)
    assert set(mapper.bound_arguments) == {"ident", "_pt_data"}
    x_val = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_allclose(
        pt.generate_numpy(lowered)(x=x_val, **mapper.bound_arguments),
        x_val + np.eye(2))


def test_deep_preprocess(deep_chain):
    x, y = deep_chain
    w = pt.make_data_wrapper(np.ones(3))
    result = preprocess(pt.make_dict_of_named_arrays({"y": y, "z": y + w}))
    assert result.compute_order == ("y", "z")
    assert result.outputs["y"].expr is y  # already lowered: kept as it is
    x_val = np.array([0.0, 2.0, 4.0])
    got = pt.generate_numpy(result.outputs)(x=x_val, **result.bound_arguments)
    # y = 0.5 y + 1 converges to 2 long before 100 000 steps
    np.testing.assert_allclose(got["y"], 2.0)
    np.testing.assert_allclose(got["z"], 3.0)
