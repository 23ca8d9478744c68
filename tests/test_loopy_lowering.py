"""Differential tests of the loopy target: every node type, evaluated by
the loopy/OpenCL target and by the NumPy reference target on the same
inputs, must agree (exactly for integers and booleans).

Programs are batched (one DictOfNamedArrays per test) to keep the number
of OpenCL compiles, and thus the runtime, small.
"""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.target.loopy import generate_loopy
from pytato_like.testing import assert_results_close

cl = pytest.importorskip("pyopencl")


pytestmark = pytest.mark.usefixtures("loopy_cache_dir")


def run_both(queue, result, **inputs):
    prg = generate_loopy(result)
    _, out = prg(queue, **inputs)
    with np.errstate(all="ignore"):  # NaNs and wrap-around are intended
        ref = pt.generate_numpy(result)(**inputs)
    # NumPy inputs: outputs come back on the host, as NumPy arrays
    if isinstance(out, dict):
        assert all(isinstance(v, np.ndarray) for v in out.values())
    else:
        (out,) = out
        assert isinstance(out, np.ndarray)
    return out, ref


def check(queue, result, **inputs):
    out, ref = run_both(queue, result, **inputs)
    assert_results_close(out, ref)
    return out, ref


def rand(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind == "u":
        return rng.integers(0, 200 if dtype.itemsize == 1 else 1000, shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-100, 100, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


ALL_DTYPES = ["float32", "float64", "int32", "int64", "uint8", "complex64",
              "complex128", "bool"]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_elementwise_arithmetic_matches_numpy(queue, dtype):
    rng = np.random.default_rng(0)
    dt = np.dtype(dtype)
    x = pt.make_placeholder("x", (5, 6), dt)
    y = pt.make_placeholder("y", (6,), dt)
    res = {"neg_or_not": -x if dt.kind != "b" else ~x,
           "mul": x * y, "add": x + y, "eq": pt.equal(x, y),
           "ne": pt.not_equal(x, y), "where": pt.where(pt.equal(x, y), x, y),
           "cast_f64": x.astype(np.float64) if dt.kind != "c" else x.real,
           "cast_bool": x.astype(bool)}
    if dt.kind != "b":
        res["sub"] = x - y
        res["scalar"] = 3 * x + 1
    if dt.kind in "iu":
        res["floordiv"] = x // y
        res["mod"] = x % y
        res["and"] = x & y
        res["or"] = x | y
        res["xor"] = x ^ y
        res["invert"] = ~x
        res["pow"] = x ** 2
    if dt.kind in "fc":
        res["div"] = x / (y + 3)
        res["sqrt"] = pt.sqrt(x)
        res["exp"] = pt.exp(x)
        res["abs"] = pt.abs(x)
        res["pow"] = x ** 2
    if dt.kind == "c":
        res["conj"] = pt.conj(x)
        res["real"] = pt.real(x)
        res["imag"] = pt.imag(x)
    if dt.kind in "fiu":
        res["lt"] = x < y
        res["ge"] = x >= y
        res["maximum"] = pt.maximum(x, y)
        res["minimum"] = pt.minimum(x, y)
    if dt.kind == "f":
        res["fdiv"] = x // (y + 0.25)
        res["fmod"] = x % (y + 0.25)
        for fn in ("sin", "cos", "tan", "arctan", "sinh", "cosh", "tanh"):
            res[fn] = getattr(pt, fn)(x)
        res["log"] = pt.log(pt.abs(x) + 1)
        res["log10"] = pt.log10(pt.abs(x) + 1)
        res["arcsin"] = pt.arcsin(x / 10)
        res["arctan2"] = pt.arctan2(x, y)
        res["isnan"] = pt.isnan(pt.log(x))
    if dt.kind == "b":
        res["and"] = x & y
        res["or"] = x | y
        res["xor"] = x ^ y
        res["land"] = pt.logical_and(x, y)
        res["lor"] = pt.logical_or(x, pt.logical_not(y))
    check(queue, pt.make_dict_of_named_arrays(res), x=rand(rng, (5, 6), dt),
          y=rand(rng, (6,), dt))


def test_integer_division_sign_rules_and_zero_divisor(queue):
    a = np.array([7, -7, 7, -7, 0, 5, -5, 3, np.iinfo(np.int32).min], np.int32)
    b = np.array([2, 2, -2, -2, 3, 0, 0, -1, -1], np.int32)
    x = pt.make_placeholder("x", a.shape, np.int32)
    y = pt.make_placeholder("y", b.shape, np.int32)
    with np.errstate(all="ignore"):
        check(queue, pt.make_dict_of_named_arrays(
            {"fd": x // y, "md": x % y, "fdc": x // -3, "mdc": x % 5}), x=a, y=b)


def test_float_floor_division_edge_cases(queue):
    a = np.array([1.0, -1.0, 7.5, -7.5, 0.0, 1e300, np.inf, 3.0])
    b = np.array([0.1, 0.1, -2.0, 2.0, -3.0, 1e-300, 2.0, 0.0])
    x = pt.make_placeholder("x", a.shape, np.float64)
    y = pt.make_placeholder("y", b.shape, np.float64)
    with np.errstate(all="ignore"):
        check(queue, pt.make_dict_of_named_arrays({"fd": x // y, "md": x % y}),
              x=a, y=b)


def test_integer_overflow_wraps(queue):
    a = np.array([120, 127, -128, 100], np.int8)
    u = np.array([250, 255, 0, 3], np.uint8)
    i64 = np.array([2**62, -2**62, 2**63 - 1, 5], np.int64)
    x = pt.make_placeholder("x", a.shape, np.int8)
    y = pt.make_placeholder("y", u.shape, np.uint8)
    z = pt.make_placeholder("z", i64.shape, np.int64)
    check(queue, pt.make_dict_of_named_arrays({
        "i8": (x + x) // 3, "u8": (y + y) * 3 - 7, "i64": z * 4 + 1,
        "shift": z << 3, "pow": x ** 3}), x=a, y=u, z=i64)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64",
                                   "uint8", "complex128", "bool"])
def test_reductions_match_numpy(queue, dtype):
    rng = np.random.default_rng(1)
    dt = np.dtype(dtype)
    x = pt.make_placeholder("x", (4, 5, 3), dt)
    res = {"sum_all": pt.sum(x), "sum_1": pt.sum(x, axis=1),
           "sum_02": pt.sum(x, axis=(0, 2)), "any": pt.any(x, axis=2),
           "all": pt.all(x, axis=0), "prod": pt.prod(x, axis=2)}
    res["max"] = pt.amax(x, axis=1)  # complex: lexicographic, as NumPy
    res["min"] = pt.amin(x, axis=(0, 1))
    if dt.kind in "fc":
        res["mean"] = pt.mean(x, axis=0)
    check(queue, pt.make_dict_of_named_arrays(res), x=rand(rng, (4, 5, 3), dt))


def test_max_min_reductions_propagate_nan(queue):
    a = np.arange(12.0).reshape(3, 4)
    a[1, 2] = np.nan
    x = pt.make_placeholder("x", a.shape, np.float64)
    out, ref = check(queue, pt.make_dict_of_named_arrays(
        {"max0": pt.amax(x, axis=0), "min1": pt.amin(x, axis=1),
         "max": pt.amax(x)}), x=a)
    assert np.isnan(out["max"]) and np.isnan(out["min1"][1])


@pytest.mark.parametrize("dtype", ["float64", "complex64", "int64"])
def test_einsums_match_numpy(queue, dtype):
    rng = np.random.default_rng(2)
    dt = np.dtype(dtype)
    a = pt.make_placeholder("a", (4, 5), dt)
    b = pt.make_placeholder("b", (5, 3), dt)
    v = pt.make_placeholder("v", (5,), dt)
    c = pt.make_placeholder("c", (1, 5), dt)
    check(queue, pt.make_dict_of_named_arrays({
        "matmul": a @ b, "matvec": a @ v, "dot": pt.dot(v, v),
        "outer": pt.einsum("i,j->ij", v, v), "trace_like": pt.einsum("ij,ij->", a, a),
        "batched": pt.einsum("ij,jk,k->i", a, b, pt.sum(b, axis=0)),
        "broadcast": pt.einsum("ij,kj->ik", a, c),
        "transpose": pt.einsum("ij->ji", a)}),
        a=rand(rng, (4, 5), dt), b=rand(rng, (5, 3), dt), v=rand(rng, (5,), dt),
        c=rand(rng, (1, 5), dt))


@pytest.mark.parametrize("dtype", ["float64", "int32", "bool"])
def test_index_remapping_nodes_match_numpy(queue, dtype):
    rng = np.random.default_rng(3)
    dt = np.dtype(dtype)
    x = pt.make_placeholder("x", (4, 6), dt)
    y = pt.make_placeholder("y", (2, 6), dt)
    idx = np.array([3, -1, 0, 2])
    idx2 = np.array([[1, 5], [0, -2]])
    check(queue, pt.make_dict_of_named_arrays({
        "reshape_c": x.reshape(3, 8), "reshape_f": x.reshape((8, 3), order="F"),
        "reshape_3d": x.reshape(2, 2, 6), "flatten": x.reshape(-1),
        "expand": pt.expand_dims(x, 1), "squeeze": pt.squeeze(y[:1]),
        "transpose": x.T, "roll0": pt.roll(x, 1, axis=0),
        "roll1": pt.roll(x, -2, axis=1), "roll_flat": pt.roll(x, 5),
        "concat0": pt.concatenate([x, y], axis=0),
        "concat1": pt.concatenate([x, x[:, :2]], axis=1),
        "stack": pt.stack([x, x], axis=1),
        "slice": x[1:4:2, ::-1], "slice_neg": x[::-2, 4:1:-1], "int_idx": x[2, 1:],
        "newaxis": x[None, :, 3], "adv_contig": x[idx, 1:3],
        "adv_contig2": x[:, idx2], "adv_noncontig": pt.expand_dims(x, 2)[idx, :, 0],
        "adv_both": x[idx, idx[::-1] + 1], "broadcast_to": pt.broadcast_to(y[:1], (3, 6)),
    }), x=rand(rng, (4, 6), dt), y=rand(rng, (2, 6), dt))


def test_data_wrappers_and_creation_functions(queue):
    data = np.arange(12.0).reshape(3, 4)
    d = pt.make_data_wrapper(data)
    x = pt.make_placeholder("x", (3, 4), np.float64)
    check(queue, pt.make_dict_of_named_arrays({
        "dw": d * x, "zeros": pt.zeros((2, 3)), "eye": pt.eye(4, 3, k=1),
        "arange": pt.arange(2, 11, 3), "full": pt.full((2,), 7, np.int32),
        "pad": pt.pad(x, ((1, 0), (2, 1)), constant_values=-1.0),
        "ones_like": pt.ones_like(x) + d}), x=data + 1)


def test_size_params_and_symbolic_shapes(queue):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n, 3), np.float64)
    y = pt.make_placeholder("y", (n,), np.float64)
    res = pt.make_dict_of_named_arrays({
        "s": pt.sum(x, axis=1) + y, "t": x.T @ y, "r": 2 * x,
        "c": pt.concatenate([y, y]), "n_out": n * 2})
    rng = np.random.default_rng(4)
    for size in (5, 8):
        check(queue, res, x=rng.standard_normal((size, 3)),
              y=rng.standard_normal(size))


def test_single_array_result_and_scalar_output(queue):
    x = pt.make_placeholder("x", (10,), np.float32)
    out, ref = run_both(queue, pt.sum(x * x), x=np.arange(10, dtype=np.float32))
    assert out.shape == () and out.dtype == np.float32
    assert_results_close(out, ref)


def test_outputs_that_are_inputs_or_shared(queue):
    x = pt.make_placeholder("x", (4,), np.int64)
    y = x + 1
    check(queue, pt.make_dict_of_named_arrays({"x_out": x, "y1": y, "y2": y}),
          x=np.arange(4))


def test_pyopencl_array_inputs_are_accepted(queue):
    import pyopencl.array as cla
    x = pt.make_placeholder("x", (6,), np.float64)
    prg = generate_loopy(2 * x)
    xv = np.linspace(0, 1, 6)
    _, (out,) = prg(queue, x=cla.to_device(queue, xv))
    np.testing.assert_array_equal(out.get(), 2 * xv)


def test_input_errors_are_typed(queue):
    from pytato_like.diagnostic import (
        InputDTypeMismatchError,
        InputShapeMismatchError,
        MissingInputError,
        UnexpectedInputError,
    )
    x = pt.make_placeholder("x", (3,), np.float64)
    prg = generate_loopy(x + 1)
    with pytest.raises(MissingInputError, match="'x'"):
        prg(queue)
    with pytest.raises(UnexpectedInputError, match="'z'"):
        prg(queue, x=np.zeros(3), z=1)
    with pytest.raises(InputShapeMismatchError, match=r"\(4,\)"):
        prg(queue, x=np.zeros(4))
    with pytest.raises(InputDTypeMismatchError, match="int64"):
        prg(queue, x=np.zeros(3, np.int64))


def test_name_clash_is_typed():
    from pytato_like.diagnostic import NameClashError
    a = pt.make_placeholder("x", (3,), np.float64)
    b = pt.make_placeholder("x", (4,), np.float64)
    with pytest.raises(NameClashError, match="'x'"):
        generate_loopy(pt.make_dict_of_named_arrays({"a": a + 1, "b": b + 1}))


def test_nested_boolean_comparisons_keep_their_grouping(queue):
    # C parses a <= b != c as (a <= b) != c; the generated code must not
    x = pt.make_placeholder("x", (5,), np.bool_)
    y = pt.make_placeholder("y", (5,), np.int64)
    inner = pt.not_equal(x, y)
    check(queue, pt.make_dict_of_named_arrays({
        "le": pt.roll(inner, 1) <= inner, "eq": pt.equal(x < y, inner),
        "gt": (y > 1) > pt.logical_not(x)}),
        x=np.array([True, True, False, True, False]),
        y=np.array([1, 0, 0, 3, -2]))


def test_inlined_reduction_used_twice_in_one_expression(queue):
    x = pt.make_placeholder("x", (3, 4), np.float64)
    s = pt.any(x > 0.5, axis=1)
    m = pt.sum(x, axis=1)
    check(queue, pt.make_dict_of_named_arrays({
        "stack": pt.stack([s, s, ~s], axis=-1),
        "twice": pt.where(m > 1, m, -m)}),
        x=np.random.default_rng(5).random((3, 4)))


def test_bitwise_results_compared_keep_their_grouping(queue):
    # C parses a | b < 0 as a | (b < 0); the generated code must not
    x = pt.make_placeholder("x", (4,), np.int32)
    check(queue, pt.make_dict_of_named_arrays({
        "abs_or": pt.abs(x | x), "lt": (x & 6) < 3, "eq": pt.equal(x ^ 1, 4)}),
        x=np.array([5, -4, 3, 0], np.int32))


def test_logical_operations_on_complex_values(queue):
    x = pt.make_placeholder("x", (4,), np.complex128)
    check(queue, pt.make_dict_of_named_arrays({
        "and": pt.logical_and(x, x), "not": pt.logical_not(x),
        "where": pt.where(x, 1.0, 2.0)}),
        x=np.array([0, 1j, 2, 0.5 - 1j]))


def test_naming_tags_name_stored_temporaries(queue):
    from pytato_like.tags import ImplStored, Named, PrefixNamed
    x = pt.make_placeholder("x", (8,), np.float64)
    a = (pt.sin(x) * 2).tagged({ImplStored(), Named("flux")})
    b = (a + 1).tagged({ImplStored(), PrefixNamed("rhs")})
    y = pt.roll(a, 1) + pt.roll(b, 2)
    prg = pt.generate_loopy(y)
    assert "flux" in prg.source and "rhs" in prg.source
    xv = np.linspace(0, 1, 8)
    _, (out,) = prg(queue, x=xv)
    np.testing.assert_allclose(out, pt.generate_numpy(y)(x=xv), rtol=1e-12)


def test_inlined_narrow_integers_wrap_before_widening(queue):
    x = pt.make_placeholder("x", (3,), np.uint8)
    y = pt.make_placeholder("y", (3,), np.int8)
    check(queue, pt.make_dict_of_named_arrays({
        "not_sum": pt.sum(~x), "add_div": (y + y) // 3,
        "mean_not": pt.mean(~x)}),
        x=np.array([1, 200, 7], np.uint8), y=np.array([100, -100, 7], np.int8))


def test_complex_powers_of_zero_with_small_integer_exponents(queue):
    x = pt.make_placeholder("x", (3,), np.complex128)
    check(queue, pt.make_dict_of_named_arrays({
        "p1": x ** 1, "p2": x ** 2, "p3": x ** 3, "p0": x ** 0}),
        x=np.array([0, 1 + 1j, -2j]))


def test_callers_allocator_provides_outputs_and_temporaries(queue):
    import pyopencl.tools as cl_tools
    pool = cl_tools.MemoryPool(cl_tools.ImmediateAllocator(queue))
    requested = []

    def counting_allocator(nbytes):
        requested.append(nbytes)
        return pool(nbytes)

    x = pt.make_placeholder("x", (1000,), np.float64)
    y = pt.sum(pt.sin(x) * 2) + pt.roll(x, 3) * pt.sum(x)
    value = np.linspace(0, 1, 1000)
    _, (out,) = generate_loopy(y)(queue, allocator=counting_allocator, x=value)
    assert requested, "the program allocated nothing through the caller's allocator"
    assert_results_close(out, pt.generate_numpy(y)(x=value))


def test_device_transfer_node_is_the_identity_within_one_program(queue):
    x = pt.make_placeholder("x", (50,), np.float64)
    y = pt.to_device(x, 0) * 2 + pt.to_device(x * 3, 0)
    value = np.linspace(-1, 1, 50)
    _, (out,) = generate_loopy(y)(queue, x=value)
    assert_results_close(out, 5 * value)


def test_computed_narrow_integer_index_arrays_compile(queue):
    # found by fuzzing: an int8 index computed inline carried wrap-around
    # casts into the subscript, which loopy's index analysis rejects
    x0 = pt.make_placeholder("x0", (2, 3), np.int8)
    x2 = pt.make_placeholder("x2", (4,), np.float32)
    y = x2[x0 % 3] + x2[(x0 + 1) % 4]
    inputs = {"x0": np.array([[0, 1, 2], [3, -1, 5]], np.int8),
              "x2": np.arange(4, dtype=np.float32)}
    _, (out,) = generate_loopy(y)(queue, **inputs)
    assert_results_close(out, pt.generate_numpy(y)(**inputs))
