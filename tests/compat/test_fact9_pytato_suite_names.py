"""Issue 34, items 1 and 8: names that pytato's own test suite and
arraycontext reach (``analysis.get_num_call_sites``, ``array.DataInterface``,
``array.ShapeType``/``AxesT``, ``codegen._generate_name_for_temp``, the
private helpers of ``pytato.array``, ``transform._verify_is_array``,
``transform.metadata.BINDING_NAME_RESERVED_PATTERN``,
``distributed.partition._schedule_task_batches_counted``,
``Array._hash_value``), lowering to index lambdas and raising them back, and
the exception classes of three refused operations. Values are checked against
NumPy (through the NumPy target) or hand counts."""

import pickle
import typing

import numpy as np
import pytest
from pytools import UniqueNameGenerator

import pytato_like as pt
from pytato_like.analysis import CallSiteCountMapper, get_num_call_sites
from pytato_like.array import (
    AxesT,
    Axis,
    DataInterface,
    ShapeType,
    _get_default_axes,
    _get_default_tags,
    _np_result_dtype,
)
from pytato_like.codegen import _generate_name_for_temp
from pytato_like.diagnostic import UnknownIndexLambdaExpr
from pytato_like.distributed.partition import _schedule_task_batches_counted
from pytato_like.function import trace_call
from pytato_like.raising import (
    BinaryOp,
    BinaryOpType,
    ReduceOp,
    index_lambda_to_high_level_op,
)
from pytato_like.tags import Named, PrefixNamed
from pytato_like.transform import InputGatherer, _verify_is_array
from pytato_like.transform.lower_to_index_lambda import to_index_lambda
from pytato_like.transform.metadata import BINDING_NAME_RESERVED_PATTERN

# {{{ get_num_call_sites


def _twice(u):
    return 2 * u


def _twice_twice(u):
    # two different calls of _twice in the body
    return trace_call(_twice, u) + trace_call(_twice, u + 1)


def test_get_num_call_sites_counts_calls_in_bodies_once_per_definition():
    x = pt.make_placeholder("x", (4,), np.float64)
    # 2 calls of _twice_twice in the DAG + 2 calls of _twice in its body,
    # counted once although the body is called twice
    y = trace_call(_twice_twice, x) + trace_call(_twice_twice, 3 * x)
    assert get_num_call_sites(y) == 4
    assert get_num_call_sites(
        {"y": y, "z": trace_call(_twice, x - 1)}) == 5
    assert get_num_call_sites(x + 1) == 0


def test_get_num_call_sites_counts_equal_calls_once():
    x = pt.make_placeholder("x", (4,), np.float64)
    a = trace_call(_twice, x)
    b = trace_call(_twice, x)   # an equal call, built again
    assert a is not b and a == b
    assert get_num_call_sites(a + b) == 1
    assert get_num_call_sites(a + trace_call(_twice, x + 1)) == 2


def test_call_site_count_mapper_returns_and_keeps_the_count():
    x = pt.make_placeholder("x", (4,), np.float64)
    y = trace_call(_twice_twice, x)
    mapper = CallSiteCountMapper()
    assert mapper(pt.make_dict_of_named_arrays({"y": y})) == 3
    assert mapper.count == 3


def test_get_num_call_sites_deep_dag(deep_chain):
    # 100 000 updates between two calls, at the default recursion limit
    x, y = deep_chain
    assert get_num_call_sites(trace_call(_twice, y) + trace_call(_twice, x)) == 2


def test_get_num_call_sites_deep_function_body():
    def deep_body(u):
        for _ in range(100_000):
            u = 0.5 * u + 1.0
        return trace_call(_twice, u)

    x = pt.make_placeholder("x", (3,), np.float64)
    assert get_num_call_sites(trace_call(deep_body, x)) == 2

# }}}


# {{{ pytato.array types and private helpers


def test_data_interface_is_what_data_wrappers_hold():
    data = np.arange(6.0).reshape(2, 3)
    assert isinstance(data, DataInterface)
    assert isinstance(pt.make_data_wrapper(data).data, DataInterface)
    assert not isinstance(object(), DataInterface)


def test_shape_type_and_axes_t_are_tuples_of_components_and_axes():
    assert typing.get_origin(ShapeType) is tuple
    assert typing.get_origin(AxesT) is tuple
    assert typing.get_args(AxesT) == (Axis, ...)
    x = pt.make_placeholder("x", (2, 3), np.float64)
    assert isinstance(x.shape, tuple) and isinstance(x.axes, tuple)
    assert all(isinstance(a, Axis) for a in x.axes)


@pytest.mark.parametrize("ndim", [0, 1, 3])
def test_get_default_axes(ndim):
    axes = _get_default_axes(ndim)
    assert len(axes) == ndim
    assert all(isinstance(a, Axis) and a.tags == frozenset() for a in axes)
    assert pt.make_placeholder("x", (2,) * ndim, np.float64).axes == axes


def test_get_default_tags_are_the_tags_of_new_arrays():
    x = pt.make_placeholder("x", (2,), np.float64)
    assert _get_default_tags() == frozenset()
    assert _get_default_tags(frozenset({Named("a")})) == frozenset()
    assert (x + 1).tags == _get_default_tags()


@pytest.mark.parametrize("operands", [
    (np.int8, np.int64), (np.float32, np.int64), (np.int8, 2),
    (np.float32, 2.5), (np.uint8, np.int8), (np.bool_, np.complex64)])
def test_np_result_dtype_is_numpy_promotion(operands):
    assert _np_result_dtype(*operands) == np.result_type(*operands)


def test_np_result_dtype_takes_lazy_arrays_by_dtype():
    a = pt.make_placeholder("a", (2,), np.int8)
    b = pt.make_placeholder("b", (2,), np.float32)
    assert _np_result_dtype(a, b) == (a + b).dtype == np.float32
    # Python scalars are weak (NEP 50): int8 with 3 stays int8
    assert _np_result_dtype(a, 3) == (a + 3).dtype == np.int8
    assert _np_result_dtype(a, 2.5) == np.result_type(np.int8, 2.5) \
        == np.float64


def test_hash_value_is_the_cached_hash():
    x = pt.make_placeholder("x", (3,), np.float64)
    y = 2 * x + 1
    h = hash(y)
    assert y._hash_value == h
    z = pickle.loads(pickle.dumps(y))
    assert z == y and hash(z) == z._hash_value == h

# }}}


# {{{ codegen._generate_name_for_temp


def test_generate_name_for_temp_named_takes_the_name():
    x = pt.make_placeholder("x", (3,), np.float64)
    vng = UniqueNameGenerator()
    assert _generate_name_for_temp((x + 1).tagged(Named("flux")), vng) == "flux"
    assert vng.is_name_conflicting("flux")
    # the same name again is refused, with ValueError
    with pytest.raises(ValueError, match="flux"):
        _generate_name_for_temp((x + 2).tagged(Named("flux")), vng)
    with pytest.raises(ValueError, match="x"):
        _generate_name_for_temp((x + 2).tagged(Named("x")),
                                UniqueNameGenerator({"x"}))


def test_generate_name_for_temp_prefix_and_default():
    x = pt.make_placeholder("x", (3,), np.float64)
    vng = UniqueNameGenerator()
    reference = UniqueNameGenerator()
    assert _generate_name_for_temp((x + 1).tagged(PrefixNamed("rhs")), vng) \
        == reference("rhs") == "rhs"
    assert _generate_name_for_temp((x + 2).tagged(PrefixNamed("rhs")), vng) \
        == reference("rhs") == "rhs_0"
    assert _generate_name_for_temp(x + 3, vng) == reference("_pt_temp") \
        == "_pt_temp"
    assert _generate_name_for_temp(x + 4, vng, default_prefix="tmp") \
        == reference("tmp") == "tmp"

# }}}


# {{{ transform helpers


def test_verify_is_array():
    x = pt.make_placeholder("x", (3,), np.float64)
    assert _verify_is_array(x) is x
    with pytest.raises(TypeError):
        _verify_is_array(pt.make_dict_of_named_arrays({"x": x}))


def test_binding_name_reserved_pattern():
    for name in ("_in0", "_in1", "_in12", "_i3", "_i0"):
        assert BINDING_NAME_RESERVED_PATTERN.fullmatch(name), name
    for name in ("_in01", "_in", "_0", "in0", "_x0", "_in0a"):
        assert not BINDING_NAME_RESERVED_PATTERN.fullmatch(name), name
    # the front end names its bindings by that pattern
    x = pt.make_placeholder("x", (3,), np.float64)
    y = pt.make_placeholder("y", (3,), np.float64)
    expr = pt.where(x > 0, x, y) * y
    assert expr.bindings
    assert all(BINDING_NAME_RESERVED_PATTERN.fullmatch(name)
               for name in expr.bindings)

# }}}


# {{{ distributed.partition._schedule_task_batches_counted


def test_schedule_task_batches_counted_by_hand():
    needed = {"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": set(),
              "e": {"a", "d"}}
    batches, visits = _schedule_task_batches_counted(needed)
    assert [set(b) for b in batches] == [{"c", "d"}, {"b"}, {"a"}, {"e"}]
    assert visits == 2 * len(needed)


def test_schedule_task_batches_counted_is_linear_and_minimal():
    # a chain given in reverse order (the longest walk), up to 100 000
    # long, at the default recursion limit
    for n in (1, 10, 1000, 100_000):
        needed = {i: ({i + 1} if i + 1 < n else set()) for i in range(n)}
        batches, visits = _schedule_task_batches_counted(needed)
        assert len(batches) == n
        assert batches[0] == {n - 1} and batches[-1] == {0}
        assert visits == 2 * n


def test_schedule_task_batches_counted_refuses_a_cycle():
    with pytest.raises(ValueError):
        _schedule_task_batches_counted({1: {2}, 2: {3}, 3: {1}})

# }}}


# {{{ lowering to index lambdas and raising back


def _lowered_cases():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    y = pt.make_placeholder("y", (4, 5), np.float64)
    return (x, y), {
        "roll": (pt.roll(x, 2, axis=1), lambda a, b: np.roll(a, 2, axis=1)),
        "reshape": (pt.reshape(x, (4, 3)), lambda a, b: a.reshape(4, 3)),
        "transpose": (x.T, lambda a, b: a.T),
        "einsum": (pt.einsum("ij,jk->ik", x, y), lambda a, b: a @ b),
        "sum": (pt.sum(x, axis=1), lambda a, b: a.sum(axis=1)),
        "amax": (pt.amax(x, axis=0), lambda a, b: a.max(axis=0)),
        "stack": (pt.stack([x, 2 * x]), lambda a, b: np.stack([a, 2 * a])),
        "concatenate": (pt.concatenate([x, y.T[:3]], axis=1),
                        lambda a, b: np.concatenate([a, b.T[:3]], axis=1)),
    }


@pytest.mark.parametrize("case", ["roll", "reshape", "transpose", "einsum",
                                  "sum", "amax", "stack", "concatenate"])
def test_lowered_node_computes_what_the_node_computes(case, rng):
    (x, y), cases = _lowered_cases()
    expr, np_fn = cases[case]
    lowered = to_index_lambda(expr)
    assert isinstance(lowered, pt.IndexLambda)
    assert lowered.shape == expr.shape and lowered.dtype == expr.dtype
    a = rng.standard_normal((3, 4))
    b = rng.standard_normal((4, 5))
    inputs = {ph.name: {"x": a, "y": b}[ph.name]
              for ph in InputGatherer()(lowered)}
    np.testing.assert_allclose(pt.generate_numpy(lowered)(**inputs),
                               np_fn(a, b), rtol=1e-13)


@pytest.mark.parametrize("case", ["sum", "amax"])
def test_lowered_reduction_raises_to_reduce_op(case):
    (x, _), cases = _lowered_cases()
    op = index_lambda_to_high_level_op(to_index_lambda(cases[case][0]))
    assert isinstance(op, ReduceOp)
    assert op.x is x
    assert list(op.axes) == [1 if case == "sum" else 0]


def test_lowered_elementwise_einsum_raises_to_a_product():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    y = pt.make_placeholder("y", (3, 4), np.float64)
    op = index_lambda_to_high_level_op(to_index_lambda(pt.einsum("ij,ij->ij", x, y)))
    assert op == BinaryOp(BinaryOpType.MULT, x, y)


@pytest.mark.parametrize("case", ["roll", "reshape", "transpose", "einsum",
                                  "stack", "concatenate"])
def test_lowered_index_remapping_is_no_high_level_op(case):
    # pytato's high-level operations have no roll, reshape, stack...: the
    # raising refuses them with UnknownIndexLambdaExpr, a ValueError
    _, cases = _lowered_cases()
    lowered = to_index_lambda(cases[case][0])
    with pytest.raises(UnknownIndexLambdaExpr):
        index_lambda_to_high_level_op(lowered)
    with pytest.raises(ValueError):
        index_lambda_to_high_level_op(lowered)

# }}}


# {{{ exception classes of refused operations


def test_roll_of_a_0d_array():
    x = pt.make_placeholder("x", (), np.float64)
    value = np.array(1.5)
    # no axis: one element, nothing moves (NumPy and pytato return it)
    assert pt.roll(x, 3) is x
    np.testing.assert_array_equal(pt.generate_numpy(pt.roll(x, 3) + 0)(x=value),
                                  np.roll(value, 3))
    # an axis of a 0-d array does not exist: ValueError, as NumPy's AxisError
    with pytest.raises(ValueError):
        np.roll(value, 1, axis=0)
    with pytest.raises(ValueError):
        pt.roll(x, 1, axis=0)


def test_boolean_subtraction_is_refused_with_value_and_type_error():
    a = pt.make_placeholder("a", (3,), np.bool_)
    b = pt.make_placeholder("b", (3,), np.bool_)
    with pytest.raises(TypeError):
        np.array([True]) - np.array([False])   # NumPy's class
    with pytest.raises(ValueError, match="bool"):
        a - b
    with pytest.raises(TypeError):
        a - b
    with pytest.raises(ValueError):
        a - True
    # what is meant works
    av, bv = np.array([True, False, True]), np.array([True, True, False])
    np.testing.assert_array_equal(pt.generate_numpy(a ^ b)(a=av, b=bv), av ^ bv)
    # bool minus int is integer arithmetic, not refused
    assert (a - 1).dtype == (av - 1).dtype


def test_advanced_index_into_a_zero_long_axis_is_index_error():
    x = pt.make_placeholder("x", (0, 4), np.float64)
    idx = pt.make_placeholder("idx", (3,), np.int64)
    with pytest.raises(IndexError):
        np.empty((0, 4))[np.array([0, 1, 2])]
    with pytest.raises(IndexError):
        x[idx]
    with pytest.raises(IndexError):
        x[pt.make_data_wrapper(np.array([1]))]
    with pytest.raises(IndexError):
        x[np.array([1])]
    # nothing is read when the index is empty: allowed, as in NumPy
    empty_idx = pt.make_data_wrapper(np.zeros(0, np.int64))
    assert x[empty_idx].shape == np.empty((0, 4))[np.zeros(0, np.int64)].shape
    # the other axis has room
    assert x[:, idx].shape == (0, 3)

# }}}
