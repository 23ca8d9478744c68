"""The JAX target (:func:`pytato_like.generate_jax`), checked against the
NumPy target: random DAGs, every node kind, the calling convention, the
generated source, and a DAG 100 000 nodes deep."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.testing import assert_results_close
from pytato_like.diagnostic import (
    InputShapeMismatchError,
    MissingInputError,
    UnexpectedInputError,
    UnsupportedArrayError,
)

jax = pytest.importorskip("jax", reason="the JAX target needs the optional "
                          "dependency jax (pip install 'pytato_like[jax]')")
jax.config.update("jax_enable_x64", True)

pytestmark = pytest.mark.filterwarnings(
    "ignore::numpy.exceptions.ComplexWarning",
    "ignore:invalid value encountered:RuntimeWarning",
    "ignore:divide by zero:RuntimeWarning",
    "ignore:Mean of empty slice:RuntimeWarning")


def _check_against_numpy(result, **inputs):
    """Run *result* on both targets; results must agree in shape, dtype and
    value."""
    expected = pt.generate_numpy(result)(**inputs)
    actual = pt.generate_jax(result)(**inputs)
    if isinstance(expected, dict):
        assert set(actual) == set(expected)
        for name in expected:
            assert isinstance(actual[name], jax.Array)
            assert_results_close(np.asarray(actual[name]), expected[name])
    else:
        assert isinstance(actual, jax.Array)
        assert_results_close(np.asarray(actual), expected)
    return actual


# {{{ random DAGs

@pytest.mark.parametrize("jit", [False, True])
def test_random_dags_match_numpy_target(jit):
    from pytato_like.testing import make_random_dag
    n = 60 if jit else 80
    for seed in range(n):
        dag = make_random_dag(seed)
        with np.errstate(all="ignore"):
            ref = pt.generate_numpy(dag.result)(**dag.inputs)
            out = pt.generate_jax(dag.result, jit=jit)(**dag.inputs)
        dag.check({name: np.asarray(v) for name, v in out.items()},
                  numpy_rounding=False)  # XLA may contract and reassociate
        assert {k: np.asarray(v).dtype for k, v in out.items()} == \
            {k: v.dtype for k, v in ref.items()}


def test_larger_random_dags_with_narrow_dtypes():
    from pytato_like.testing import make_random_dag
    for seed in range(25):
        dag = make_random_dag(seed, n_ops=40, n_inputs=5, max_outputs=5,
                              dtypes=("float32", "int8", "uint8", "complex64",
                                      "bool"))
        with np.errstate(all="ignore"):
            out = pt.generate_jax(dag.result)(**dag.inputs)
        dag.check({name: np.asarray(v) for name, v in out.items()},
                  numpy_rounding=False)  # XLA may contract and reassociate


def test_hypothesis_random_dags_match_numpy():
    from hypothesis import HealthCheck, given, settings

    from pytato_like.testing import random_dags

    @settings(max_examples=40, deadline=None,
              suppress_health_check=[HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(random_dags())
    def check(dag):
        with np.errstate(all="ignore"):
            out = pt.generate_jax(dag.result)(**dag.inputs)
        dag.check({name: np.asarray(v) for name, v in out.items()},
                  numpy_rounding=False)  # XLA may contract and reassociate

    check()

# }}}


# {{{ node kinds

def test_elementwise_broadcasting_calls_and_where(rng):
    x = pt.make_placeholder("x", (3, 4))
    y = pt.make_placeholder("y", (4,), dtype=np.float32)
    k = pt.make_placeholder("k", (3, 1), dtype=np.int8)
    result = pt.make_dict_of_named_arrays({
        "a": pt.sin(x) * y + k,
        "b": pt.where(x > 0.5, pt.sqrt(x), -y),
        "c": pt.arctan2(x, y + 1) ** 2,
        "d": (k // 2) % 3 + (k << 1),
        "e": pt.logical_and(x < 0.3, pt.logical_not(y > 0.2)),
        "f": pt.maximum(x, y) - pt.minimum(x, 0.5),
        "g": x.astype(np.int32) + pt.abs(pt.log(x + 1j)),
    })
    _check_against_numpy(result, x=rng.random((3, 4)),
                         y=rng.random(4).astype(np.float32),
                         k=rng.integers(-5, 5, (3, 1)).astype(np.int8))


def test_reductions(rng):
    x = pt.make_placeholder("x", (3, 4, 5))
    b = pt.make_placeholder("b", (3, 4), dtype=bool)
    result = pt.make_dict_of_named_arrays({
        "s": pt.sum(x, axis=(0, 2)), "p": pt.prod(x, axis=1),
        "mx": pt.amax(x), "mn": pt.amin(x, axis=2, keepdims=True),
        "any": pt.any(b, axis=0), "all": pt.all(b),
        "mean": pt.mean(x, axis=-1), "nested": pt.sum(x - pt.sum(x, axis=0), axis=1),
    })
    _check_against_numpy(result, x=rng.random((3, 4, 5)),
                         b=rng.random((3, 4)) > 0.3)


def test_einsum_and_matmul(rng):
    a = pt.make_placeholder("a", (3, 4))
    b = pt.make_placeholder("b", (4, 5), dtype=np.float32)
    v = pt.make_placeholder("v", (1, 4))
    result = pt.make_dict_of_named_arrays({
        "mm": a @ b, "tr": pt.einsum("ii->", a[:, :3]),
        "outer": pt.einsum("i,j->ij", a[0], b[:, 1]),
        "bcast": pt.einsum("ij,ij->i", a, v),
        "dot": pt.dot(a[0], a[1]),
    })
    _check_against_numpy(result, a=rng.random((3, 4)),
                         b=rng.random((4, 5)).astype(np.float32),
                         v=rng.random((1, 4)))


def test_shape_operations(rng):
    x = pt.make_placeholder("x", (2, 3, 4))
    result = pt.make_dict_of_named_arrays({
        "reshape": pt.reshape(x, (6, 4)),
        "reshape_f": pt.reshape(x, (4, 6), order="F"),
        "perm": pt.transpose(x, (2, 0, 1)),
        "roll": pt.roll(x, 2, axis=1),
        "concat": pt.concatenate([x, 2 * x], axis=1),
        "stack": pt.stack([x, x + 1, x.astype(np.int8)], axis=2),
        "expand": pt.expand_dims(x, 1),
        "squeeze": pt.squeeze(x[:, :1, :]),
        "bcast": pt.broadcast_to(x[0, 0], (3, 4)),
        "pad": pt.pad(x, ((1, 0), (0, 2), (1, 1))),
    })
    _check_against_numpy(result, x=rng.random((2, 3, 4)))


def test_every_index_kind(rng):
    x = pt.make_placeholder("x", (5, 6, 7))
    idx = pt.make_placeholder("idx", (3,), dtype=np.int64)
    idx2 = pt.make_data_wrapper(np.array([[0, -1], [2, 3]], dtype=np.int8))
    result = pt.make_dict_of_named_arrays({
        "basic": x[1:4, ::-2, 3],
        "negative_step": x[::-1, -2:0:-2],
        "empty": x[3:1],
        "contiguous": x[:, idx, idx],
        "noncontiguous": x[idx, :, idx],
        "data_index": x[1, idx2],
        "lazy_index_of_lazy": x[idx[::-1]],
    })
    _check_against_numpy(result, x=rng.random((5, 6, 7)),
                         idx=np.array([0, 4, -2]))


def test_creation_functions_and_data_wrappers(rng):
    data = rng.random((3, 3))
    dw = pt.make_data_wrapper(data, name="table")
    anon = pt.make_data_wrapper(np.arange(3))
    result = pt.make_dict_of_named_arrays({
        "eye": pt.eye(3) + dw, "arange": pt.arange(2, 11, 3) * anon,
        "zeros": pt.zeros((2, 3), dtype=np.int16), "full": pt.full((2,), 7.5),
        "ones_like": pt.ones_like(dw),
    })
    prg = pt.generate_jax(result)
    assert set(prg.bound_arguments) == {"table", "_pt_data"}
    _check_against_numpy(result)


def test_size_params_are_inferred_and_static_under_jit(rng):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n, 3))
    y = pt.sum(pt.reshape(x, (3 * n,)) * 2) + pt.zeros((n, 3)).sum(axis=0)
    ref = pt.generate_numpy(y)(x=np.ones((4, 3)))
    for jit in (False, True):
        prg = pt.generate_jax(y, jit=jit)
        for rows in (4, 2):
            value = rng.random((rows, 3))
            np.testing.assert_allclose(
                np.asarray(prg(x=value)), pt.generate_numpy(y)(x=value))
        np.testing.assert_allclose(np.asarray(prg(x=np.ones((4, 3)), n=4)), ref)
    assert "static_argnames=('n',)" in pt.generate_jax(y, jit=True).program


def test_device_transfer_is_the_identity(rng):
    x = pt.make_placeholder("x", (4,))
    y = pt.to_device(2 * x, 1) + 1
    _check_against_numpy(y, x=rng.random(4))


def test_distributed_nodes_are_refused():
    x = pt.make_placeholder("x", (4,))
    recv = pt.make_distributed_recv(1, 42, (4,), np.float64)
    with pytest.raises(UnsupportedArrayError, match="DistributedRecv"):
        pt.generate_jax(x + recv)
    holder = pt.staple_distributed_send(x, dest_rank=1, comm_tag=7, stapled_to=x + 1)
    with pytest.raises(UnsupportedArrayError, match="DistributedSendRefHolder"):
        pt.generate_jax(holder)

# }}}


# {{{ calling convention and source

def test_array_result_is_one_array_and_dict_result_a_dict(rng):
    x = pt.make_placeholder("x", (3,))
    value = rng.random(3)
    single = pt.generate_jax(2 * x)(x=value)
    assert isinstance(single, jax.Array)
    np.testing.assert_allclose(np.asarray(single), 2 * value)
    named = pt.generate_jax({"a": 2 * x, "b": x})(x=value)
    assert set(named) == {"a", "b"}
    np.testing.assert_allclose(np.asarray(named["b"]), value)


def test_generated_source_is_inspectable_and_named(capsys):
    x = pt.make_placeholder("x", (3, 4))
    prg = pt.generate_jax(pt.sum(x * 2, axis=1), function_name="my_kernel",
                          jit=True, show_code=True, colorize_show_code=False)
    assert isinstance(prg, pt.target.python.BoundJAXPythonProgram)
    assert prg.entrypoint == "my_kernel"
    assert "import jax.numpy as _pt_jnp" in prg.program
    assert "@_pt_jax_jit\ndef my_kernel(*, x):" in prg.program
    assert prg.expected_arguments == frozenset({"x"})
    assert prg.program in capsys.readouterr().out
    # the program is plain Python: compile it on its own
    compile(prg.program, "<test>", "exec")


def test_inputs_are_checked():
    x = pt.make_placeholder("x", (3,))
    prg = pt.generate_jax(x + 1)
    with pytest.raises(MissingInputError, match="'x'"):
        prg()
    with pytest.raises(InputShapeMismatchError, match="'x'"):
        prg(x=np.zeros(4))
    with pytest.raises(UnexpectedInputError):
        prg(np.zeros(3))
    with pytest.raises(UnexpectedInputError, match="'z'"):
        prg(x=np.zeros(3), z=1)
    # a Python scalar converts to a 0-d placeholder's dtype, as on the
    # NumPy target
    s = pt.make_placeholder("s", (), dtype=np.float32)
    assert np.asarray(pt.generate_jax(s * 2)(s=1.5)).dtype == np.float32


def test_jax_arrays_are_accepted_as_inputs(rng):
    x = pt.make_placeholder("x", (3,))
    value = jax.numpy.asarray(rng.random(3))
    np.testing.assert_allclose(np.asarray(pt.generate_jax(x * 3)(x=value)),
                               3 * np.asarray(value))

# }}}


def test_deep_chain_generates_and_runs(deep_chain):
    x, y = deep_chain
    prg = pt.generate_jax(y)
    assert prg.program.count("\n") > 100_000
    value = np.array([0.0, 1.0, 4.0])
    np.testing.assert_allclose(np.asarray(prg(x=value)),
                               pt.generate_numpy(y)(x=value))


# {{{ JAX's 64-bit mode

_X64_OFF_SCRIPT = r"""
import json, sys
import numpy as np
import jax
import pytato_like as pt

assert not jax.config.jax_enable_x64, "JAX's default is 32 bits"
x = pt.make_placeholder("x", (5,), np.float64)
n = pt.make_placeholder("n", (3,), np.int64)
wrapped = pt.make_data_wrapper(np.linspace(0.0, 1.0, 5) + 1e-12)
report = {}
for jit in (False, True):
    xv = np.arange(5.0) + 1e-10
    out = pt.generate_jax(2 * x + wrapped, jit=jit)(x=xv)
    ref = pt.generate_numpy(2 * x + wrapped)(x=xv)
    big = pt.generate_jax(n * 2**40, jit=jit)(n=np.arange(3))
    report[str(jit)] = {
        "dtype": str(out.dtype), "exact": bool(np.array_equal(np.asarray(out), ref)),
        "int_dtype": str(big.dtype), "ints": np.asarray(big).tolist()}
report["x64_after"] = bool(jax.config.jax_enable_x64)
print(json.dumps(report))
"""


def test_float64_program_runs_in_64_bits_with_jax_default_x64_off():
    """JAX's default (64-bit mode off) would turn a float64 input into
    float32; the program runs in 64 bits anyway (for its call only) and
    the user's global setting stays off. A fresh process, since this
    module turns the mode on globally."""
    import json
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    proc = subprocess.run([sys.executable, "-c", _X64_OFF_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    for jit in ("False", "True"):
        assert report[jit]["dtype"] == "float64"
        assert report[jit]["exact"], report
        assert report[jit]["int_dtype"] == "int64"
        assert report[jit]["ints"] == [0, 2**40, 2**41]
    assert report["x64_after"] is False


def test_float64_program_with_x64_on_globally_keeps_it_on():
    assert jax.config.jax_enable_x64  # set by this module, as users do
    x = pt.make_placeholder("x", (4,), np.float64)
    value = np.arange(4.0) / 3
    out = pt.generate_jax(x * x)(x=value)
    assert out.dtype == np.float64
    np.testing.assert_allclose(np.asarray(out), value * value, rtol=1e-15)
    assert jax.config.jax_enable_x64

# }}}
