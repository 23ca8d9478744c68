"""Issue 9, fact 5: the names pytato users import from ``pytato.tags``,
``pytato.dtype``, ``pytato.diagnostic``, ``pytato.analysis`` and
``pytato.utils``, and ``pytato.set_traceback_tag_enabled``, used as pytato
programs use them. Counts are checked against hand counts, results of
rebuilt arrays against NumPy through the NumPy target."""

import operator
import pickle
import traceback

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import analysis, diagnostic, utils
from pytato_like.tags import (
    CallImplementationTag,
    CreatedAt,
    ExpandedDimsReshape,
    ForceValueArgTag,
    FunctionIdentifier,
    ImplStored,
    InfoTag,
    InlineCallTag,
)

# {{{ set_traceback_tag_enabled / CreatedAt


@pytest.fixture
def traceback_tags():
    pt.set_traceback_tag_enabled(True)
    yield
    pt.set_traceback_tag_enabled(False)


def _created_at(ary):
    (tag,) = [t for t in ary.non_equality_tags if isinstance(t, CreatedAt)]
    return tag


def test_traceback_tag_off_by_default():
    x = pt.make_placeholder("x", (3,), np.float64)
    assert (x + 1).non_equality_tags == frozenset()


def test_traceback_tag_records_user_line(traceback_tags):
    x = pt.make_placeholder("x", (3,), np.float64)
    line = traceback.extract_stack()[-1].lineno + 1
    y = 2 * x + 1
    tag = _created_at(y)
    assert isinstance(tag, InfoTag)
    innermost = tag.traceback.frames[-1]
    assert innermost.filename == __file__
    assert innermost.lineno == line
    assert innermost.name == "test_traceback_tag_records_user_line"
    # no frame from inside the library
    import os
    package_dir = os.path.dirname(pt.__file__)
    assert not any(os.path.abspath(f.filename).startswith(package_dir)
                   for f in tag.traceback.frames)
    assert "test_fact5_names.py" in tag.traceback.short_str()
    assert isinstance(tag.traceback.to_stacksummary(), traceback.StackSummary)


def test_traceback_tag_ignored_by_equality_and_hash(traceback_tags):
    x = pt.make_placeholder("x", (3,), np.float64)
    a = x + 1
    b = x + 1  # another line: another CreatedAt
    assert _created_at(a) != _created_at(b)
    assert a == b and hash(a) == hash(b)
    assert a.tags == frozenset()
    # copies keep the original creation site
    assert _created_at(a.tagged(ImplStored())) == _created_at(a)


def test_traceback_tag_on_every_constructor(traceback_tags):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (4, 4), np.float64)
    w = pt.make_data_wrapper(np.ones(4))
    arrays = [n, x, w, x.T, x.reshape(16), x[1:], pt.roll(x, 1),
              pt.concatenate([x, x]), pt.stack([x, x]),
              pt.einsum("ij,j->i", x, w), pt.sum(x, axis=0), pt.zeros(3)]
    for ary in arrays:
        assert _created_at(ary).traceback.frames[-1].filename == __file__


def test_traceback_tag_result_unchanged(traceback_tags):
    x = pt.make_placeholder("x", (5,), np.float64)
    xv = np.linspace(-1, 1, 5)
    out = pt.generate_numpy(pt.sin(x) * 3 - x)(x=xv)
    np.testing.assert_allclose(out, np.sin(xv) * 3 - xv)


def test_created_at_is_picklable(traceback_tags):
    x = pt.make_placeholder("x", (3,), np.float64)
    tag = _created_at(x + 1)
    assert pickle.loads(pickle.dumps(tag)) == tag


# }}}


# {{{ tags

def test_expand_dims_tags_reshape():
    x = pt.make_placeholder("x", (10, 4), np.float64)
    y = pt.expand_dims(x, (0, 2, 4))
    assert y.shape == (1, 10, 1, 4, 1)
    assert y.tags_of_type(ExpandedDimsReshape) == frozenset(
        {ExpandedDimsReshape(new_dims=(0, 2, 4))})
    assert pt.expand_dims(x, -1).tags_of_type(ExpandedDimsReshape) == frozenset(
        {ExpandedDimsReshape((2,))})
    xv = np.arange(40.0).reshape(10, 4)
    np.testing.assert_array_equal(pt.generate_numpy(y)(x=xv),
                                  np.expand_dims(xv, (0, 2, 4)))


def test_call_and_value_arg_tags_attach():
    x = pt.make_placeholder("x", (), np.float64).tagged(ForceValueArgTag())
    assert ForceValueArgTag() in x.tags
    assert issubclass(InlineCallTag, CallImplementationTag)
    assert FunctionIdentifier("f") == FunctionIdentifier(identifier="f")
    assert FunctionIdentifier("f") != FunctionIdentifier("g")
    np.testing.assert_array_equal(pt.generate_numpy(x * 2)(x=np.float64(3.0)), 6.0)

# }}}


# {{{ dtype

def test_dtype_module():
    from pytato_like import dtype
    i8 = pt.make_placeholder("i", (2,), np.int8)
    f32 = pt.make_placeholder("f", (2,), np.float32)
    assert dtype.result_type(i8, f32) == np.result_type(np.int8, np.float32)
    assert dtype.result_type(i8, 1) == (np.zeros(2, np.int8) + 1).dtype
    assert dtype.result_type(f32, 1.0) == np.float32
    assert dtype.can_cast(i8, np.int32) and not dtype.can_cast(f32, np.int32)
    assert dtype.is_integer_dtype("uint8") and not dtype.is_integer_dtype(bool)
    assert dtype.is_floating_dtype(np.float16)
    assert dtype.is_complex_dtype("complex64")
    with pytest.raises(diagnostic.DTypeError):
        dtype.result_type(object())

# }}}


# {{{ diagnostic

def test_cannot_broadcast_error():
    a = pt.make_placeholder("a", (3, 4), np.float64)
    b = pt.make_placeholder("b", (5,), np.float64)
    with pytest.raises(diagnostic.CannotBroadcastError, match=r"\(3, 4\).*\(5,\)"):
        a + b
    with pytest.raises(diagnostic.CannotBroadcastError):
        pt.broadcast_to(a, (3, 5))
    # old name still catches it
    with pytest.raises(diagnostic.ShapeMismatchError):
        a * b


def test_invalid_einsum_index():
    a = pt.make_placeholder("a", (3, 4), np.float64)
    with pytest.raises(diagnostic.InvalidEinsumIndex, match="'k'"):
        pt.einsum("ij->k", a)
    with pytest.raises(diagnostic.InvalidEinsumIndex, match="'1'"):
        pt.einsum("i1->i", a)
    with pytest.raises(diagnostic.EinsumSpecError):
        pt.einsum("ij->ii", a)


def test_not_a_reduction_axis():
    from pytato_like.raising import index_lambda_to_high_level_op
    x = pt.make_placeholder("x", (10, 10), np.float64)
    x_sum = pt.sum(x)
    with pytest.raises(diagnostic.NotAReductionAxis, match="'_0'"):
        x_sum.with_tagged_reduction("_0", ImplStored())
    hlo = index_lambda_to_high_level_op(x_sum)
    tagged = x_sum.with_tagged_reduction(hlo.axes[1], ImplStored())
    assert tagged.var_to_reduction_descr[hlo.axes[1]].tags == {ImplStored()}
    assert tagged.var_to_reduction_descr[hlo.axes[0]].tags == frozenset()
    xv = np.arange(100.0).reshape(10, 10)
    assert pt.generate_numpy(tagged)(x=xv) == xv.sum()


def test_diagnostic_hierarchy():
    for name in ("NameClashError", "CannotBroadcastError",
                 "UnknownIndexLambdaExpr", "InvalidEinsumIndex",
                 "NotAReductionAxis", "CannotBeLoweredToIndexLambda"):
        assert issubclass(getattr(diagnostic, name), diagnostic.PytatoLikeError)

# }}}


# {{{ analysis

def _dag():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    w = pt.make_data_wrapper(np.arange(4.0))
    y = (x + w) * 2
    z = (x + w) * 2  # equal to y, another object
    return x, w, y, z, pt.make_dict_of_named_arrays({"a": y + z,
                                                     "b": pt.sum(y, axis=0)})


def test_node_type_counts():
    x, w, y, z, out = _dag()
    # unique: x, w, x+w, (x+w)*2, y+z, sum  -> 4 index lambdas
    counts = analysis.get_node_type_counts(out)
    assert dict(counts) == {pt.Placeholder: 1, pt.DataWrapper: 1,
                            pt.IndexLambda: 4}
    with_dups = analysis.get_node_type_counts(out, count_duplicates=True)
    assert with_dups[pt.IndexLambda] == 6
    mapper = analysis.NodeCountMapper(count_duplicates=False)
    mapper(out)
    assert sum(mapper.expr_type_counts.values()) == \
        analysis.get_num_nodes(out, count_duplicates=False)


def test_node_multiplicities():
    x, w, y, z, out = _dag()
    mult = analysis.get_node_multiplicities(out)
    assert mult[x] == 1 and mult[w] == 1
    assert mult[x + w] == 2 and mult[y] == 2
    assert mult[y + z] == 1
    assert sum(mult.values()) == analysis.get_num_nodes(out, count_duplicates=True)


def test_tag_counts_and_materialized_nodes():
    x = pt.make_placeholder("x", (3,), np.float64)
    a = (x + 1).tagged(ImplStored())
    b = (a * 2).tagged([ImplStored(), pt.tags.Named("b")])
    out = b + a
    assert analysis.get_num_tags_of_type(out, ImplStored) == 2
    assert analysis.get_num_tags_of_type(out, [ImplStored, pt.tags.Named]) == 1
    assert analysis.get_num_tags_of_type(out, pt.tags.PrefixNamed) == 0
    assert analysis.TagCountMapper(ImplStored)(out) == 2
    assert analysis.collect_materialized_nodes(out) == frozenset({x, a, b})
    collector = analysis.MaterializedNodeCollector()
    collector(out)
    assert collector.materialized_nodes == {x, a, b}


def test_list_of_users_and_predecessors():
    x = pt.make_placeholder("x", (3,), np.float64)
    y = pt.make_placeholder("y", (3,), np.float64)
    a = x + y
    b = a * x
    users = analysis.get_list_of_users(b)
    assert users[x] == [a, b] or users[x] == [b, a]
    assert users[a] == [b] and users[b] == []
    assert analysis.get_nusers(b)[x] == len(users[x])
    assert analysis.ListOfDirectPredecessorsGetter()(b) == [a, x]
    assert analysis.DirectPredecessorsGetter()(b) == frozenset({a, x})


def test_pytato_key_builder():
    kb = analysis.PytatoKeyBuilder()
    x = pt.make_placeholder("x", (3, 4), np.float64)
    data = np.arange(4.0)
    a = pt.sum((x + pt.make_data_wrapper(data)) * 2, axis=1)
    b = pt.sum((x + pt.make_data_wrapper(data.copy())) * 2, axis=1)
    c = pt.sum((x + pt.make_data_wrapper(data + 1)) * 2, axis=1)
    assert kb(a) == kb(b)  # same structure, same data contents
    assert kb(a) != kb(c)
    assert kb(a) != kb(pt.sum((x + pt.make_data_wrapper(data)) * 2, axis=0))
    assert kb(np.arange(3)) == kb(np.arange(3)) != kb(np.arange(4))
    assert kb({"k": a}) == kb({"k": b})
    d1 = pt.make_dict_of_named_arrays({"u": a, "v": x})
    d2 = pt.make_dict_of_named_arrays({"v": x, "u": b})
    assert kb(d1) == kb(d2)


def test_analysis_mappers_deep(deep_chain):
    x, y = deep_chain
    counts = analysis.get_node_type_counts(y)
    assert counts == {pt.Placeholder: 1, pt.IndexLambda: 200_000}
    assert sum(analysis.get_node_multiplicities(y).values()) == 200_001
    assert analysis.get_num_tags_of_type(y, ImplStored) == 0
    assert analysis.collect_materialized_nodes(y) == frozenset({x})
    users = analysis.get_list_of_users(y)
    assert len(users) == 200_001 and users[y] == []
    assert len(analysis.PytatoKeyBuilder()(y)) > 0

# }}}


# {{{ utils

def test_einsum_subscript_strings():
    a = pt.make_placeholder("A", (10, 6), np.float64)
    b = pt.make_placeholder("B", (6, 5), np.float64)
    c = pt.make_placeholder("C", (5, 4), np.float64)
    abc = pt.einsum("ij,jk,kl->il", a, b, c)
    assert utils.get_einsum_subscript_str(abc) == "ij,jk,kl->il"
    assert utils.get_einsum_specification(abc) == "ij,jk,kl->il"
    # the string rebuilds an equal einsum whatever letters were used
    other = pt.einsum("pq,qr->pr", a, b)
    rebuilt = pt.einsum(utils.get_einsum_subscript_str(other), a, b)
    assert rebuilt == other
    av = np.random.default_rng(0).random((6, 6))
    sq = pt.make_placeholder("S", (6, 6), np.float64)
    trace = pt.einsum("aa->", sq)
    assert utils.get_einsum_subscript_str(trace) == "ii->"
    np.testing.assert_allclose(
        pt.generate_numpy(pt.einsum(utils.get_einsum_subscript_str(trace), sq))(
            S=av), np.trace(av))
    with pytest.raises(diagnostic.UnsupportedArrayError):
        utils.get_einsum_subscript_str(a)


def test_get_indexing_expression():
    from pytato_like.scalar_expr import index_var
    assert utils.get_indexing_expression((1, 6), (10, 6)) == (0, index_var(1))
    assert utils.get_indexing_expression((6,), (10, 6)) == (index_var(1),)
    assert utils.get_indexing_expression((), (3,)) == ()
    with pytest.raises(diagnostic.CannotBroadcastError):
        utils.get_indexing_expression((4,), (10, 6))


def test_broadcast_binary_op():
    a = pt.make_placeholder("a", (4, 1), np.float32)
    b = pt.make_placeholder("b", (3,), np.int32)
    av = np.arange(4, dtype=np.float32).reshape(4, 1)
    bv = np.arange(3, dtype=np.int32)
    res = utils.broadcast_binary_op(
        a, b, operator.add,
        lambda x, y: utils.get_common_dtype_of_ary_or_scalars([x, y]))
    assert res.shape == (4, 3) and res.dtype == np.result_type(np.float32, np.int32)
    np.testing.assert_allclose(pt.generate_numpy(res)(a=av, b=bv), av + bv)
    res = utils.broadcast_binary_op(
        2, a, operator.mul, lambda x, y: np.dtype(np.float32),
        tags=frozenset({ImplStored()}))
    assert ImplStored() in res.tags
    np.testing.assert_allclose(pt.generate_numpy(res)(a=av), 2 * av)
    assert utils.broadcast_binary_op(2, 3, operator.add, None) == 5


def test_common_dtype_of_ary_or_scalars():
    i8 = pt.make_placeholder("i", (2,), np.int8)
    assert utils.get_common_dtype_of_ary_or_scalars([i8, 3]) == np.int8
    assert utils.get_common_dtype_of_ary_or_scalars([i8, 3.0]) == np.float64
    assert utils.get_common_dtype_of_ary_or_scalars(
        [i8, pt.make_placeholder("f", (2,), np.float32)]) == np.float32


def test_normalized_slice_does_not_change_axis():
    from pytato_like.array import NormalizedSlice
    assert utils.normalized_slice_does_not_change_axis(NormalizedSlice(0, 5, 1), 5)
    assert not utils.normalized_slice_does_not_change_axis(
        NormalizedSlice(1, 5, 1), 5)
    assert not utils.normalized_slice_does_not_change_axis(
        NormalizedSlice(0, 4, 1), 5)
    assert not utils.normalized_slice_does_not_change_axis(
        NormalizedSlice(0, 5, 2), 5)
    x = pt.make_placeholder("x", (5, 3), np.float64)
    idx = x[:, 1:]
    assert utils.normalized_slice_does_not_change_axis(idx.indices[0], 5)
    assert not utils.normalized_slice_does_not_change_axis(idx.indices[1], 3)

# }}}
