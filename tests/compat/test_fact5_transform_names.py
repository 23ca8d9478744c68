"""Issue 9, fact 5 (transform part): ``pytato.transform``'s deduplication,
input gathering, caches and errors, ``transform.materialize.MPMSMaterializer``
and ``transform.lower_to_index_lambda.ToIndexLambdaMixin`` /
``ToIndexLambdaMapper``, used as a pytato user uses them; values checked
against NumPy through the NumPy target."""

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like.analysis import get_num_nodes
from pytato_like.tags import ImplStored
from pytato_like.transform import (
    CacheCollisionError,
    CachedMapper,
    CachedMapperCache,
    CombineMapper,
    CopyMapper,
    DataWrapperDeduplicator,
    Deduplicator,
    ForeignObjectError,
    InputGatherer,
    ListOfInputsGatherer,
    MapperCreatedDuplicateError,
    TransformMapperCache,
    deduplicate,
)
from pytato_like.transform.lower_to_index_lambda import (
    ToIndexLambdaMapper,
    ToIndexLambdaMixin,
)
from pytato_like.transform.materialize import (
    MPMSMaterializer,
    MPMSMaterializerAccumulator,
)


def _ids(expr) -> set[int]:
    """The ids of the distinct node objects of *expr*."""
    seen, stack = set(), [expr]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(getattr(node, "bindings", {}).values())
    return seen


# {{{ Deduplicator / deduplicate

def test_deduplicate_merges_equal_subexpressions_built_twice():
    x = pt.make_placeholder("x", (5,), np.float64)
    a = pt.sin(x) * 2
    b = pt.sin(x) * 2  # equal to a, built separately
    assert a is not b and a == b
    expr = a + b
    new = deduplicate(expr)
    assert new == expr
    assert new.bindings["_in0"] is new.bindings["_in1"]
    assert len(_ids(new)) == 4 < len(_ids(expr)) == 6
    assert get_num_nodes(new, count_duplicates=True) == 4
    x_val = np.linspace(0, 1, 5)
    np.testing.assert_allclose(pt.generate_numpy(new)(x=x_val),
                               4 * np.sin(x_val))


def test_deduplicate_returns_a_dag_without_duplicates_unchanged():
    x = pt.make_placeholder("x", (5,), np.float64)
    expr = pt.exp(x) + x
    assert deduplicate(expr) is expr


def test_deduplicator_is_a_copy_mapper_users_can_subclass():
    x = pt.make_placeholder("x", (3,), np.float64)
    y = pt.make_placeholder("y", (3,), np.float64)

    class RenameXtoY(Deduplicator):
        def map_placeholder(self, expr):
            return y if expr.name == "x" else expr

    expr = (x + 1) * (y + 1)  # after renaming, both factors are y + 1
    new = RenameXtoY()(expr)
    assert new.bindings["_in0"] is new.bindings["_in1"]
    y_val = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(pt.generate_numpy(new)(y=y_val), (y_val + 1)**2)


def test_deduplicator_cache_is_shared_across_calls():
    x = pt.make_placeholder("x", (3,), np.float64)
    dedup = Deduplicator()
    first = dedup(pt.cos(x) + 1)
    second = dedup(pt.cos(x) + 1)
    assert first is second


def test_deep_deduplicate(deep_chain):
    x, y1 = deep_chain
    y2 = x
    for _ in range(100_000):
        y2 = 0.5 * y2 + 1.0
    expr = y1 - y2  # two equal, disjoint 200 000-node chains
    new = deduplicate(expr)
    assert new.bindings["_in0"] is new.bindings["_in1"]
    assert get_num_nodes(new, count_duplicates=True) == 200_002


# }}}


# {{{ data wrappers

def test_data_wrapper_deduplicator_merges_wrappers_of_one_array():
    data = np.arange(4.0)
    w1 = pt.make_data_wrapper(data)
    w2 = pt.make_data_wrapper(data)
    other = pt.make_data_wrapper(np.arange(4.0))  # same values, other memory
    expr = w1 + w2 + other
    mapper = DataWrapperDeduplicator()
    new = mapper(expr)
    wrappers = {id(n) for n in pt.transform.InputGatherer()(new)}
    assert len(wrappers) == 2
    assert mapper.data_wrappers_encountered == 3
    assert len(mapper.data_wrapper_cache) == 2
    np.testing.assert_allclose(pt.generate_numpy(new)(), 3 * data)

# }}}


# {{{ ListOfInputsGatherer

def test_list_of_inputs_gatherer_keeps_distinct_equal_inputs():
    x1 = pt.make_placeholder("x", (3,), np.float64)
    x2 = pt.make_placeholder("x", (3,), np.float64)  # equal, distinct
    y = pt.make_placeholder("y", (3,), np.float64)
    expr = (x1 + y) * x2
    inputs = ListOfInputsGatherer()(expr)
    assert [id(i) for i in inputs] == [id(x1), id(y), id(x2)]
    assert InputGatherer()(expr) == frozenset([x1, y])


def test_list_of_inputs_gatherer_subclass_keeps_per_node_results():
    x = pt.make_placeholder("x", (3,), np.float64)
    n = pt.make_size_param("n")
    z = pt.make_placeholder("z", (n,), np.float64)

    class OnlyPlaceholders(ListOfInputsGatherer):
        def map_size_param(self, expr):
            return []

    expr = pt.sum(z) + x
    assert OnlyPlaceholders()(expr) == [z, x]
    assert ListOfInputsGatherer()(expr) == [z, n, x]


def test_deep_list_of_inputs_gatherer(deep_chain):
    x, y = deep_chain
    assert ListOfInputsGatherer()(y) == [x]

    class Subclass(ListOfInputsGatherer):  # per-node path, through self.rec
        def map_size_param(self, expr):
            return []

    assert Subclass()(y) == [x]

# }}}


# {{{ caches

def test_cached_mapper_cache_passed_in_and_shared():
    x = pt.make_placeholder("x", (3,), np.float64)
    expr = pt.sin(x) + x
    calls = []

    class Count(CombineMapper[int, None]):
        def combine(self, *args):
            return sum(args)

        def map_placeholder(self, expr):
            calls.append(expr)
            return 1

    cache = CachedMapperCache(err_on_collision=False)
    assert Count(_cache=cache)(expr) == 2
    assert len(cache) == 3 and id(expr) in cache
    # a second mapper on the same cache finds every result: no new calls
    assert Count(_cache=cache)(expr) == 2
    assert len(calls) == 1
    cache.clear()
    assert len(cache) == 0


def test_transform_mapper_cache_merges_equal_results():
    x = pt.make_placeholder("x", (3,), np.float64)
    a, b = x * 3, x * 3
    expr = a - b
    plain = CopyMapper()(expr)
    assert plain is expr  # the default cache keeps the input as it is
    merged = CopyMapper(_cache=TransformMapperCache())(expr)
    assert merged.bindings["_in0"] is merged.bindings["_in1"]
    np.testing.assert_allclose(
        pt.generate_numpy(merged)(x=np.arange(3.0)), np.zeros(3))


def test_cache_collision_error():
    x1 = pt.make_placeholder("x", (2,), np.float64)
    x2 = pt.make_placeholder("x", (2,), np.float64)

    class ByValue(CachedMapper[str, None, []]):
        def get_cache_key(self, expr):
            return expr  # structural key: x1 and x2 collide

        def map_placeholder(self, expr):
            return expr.name

        def map_index_lambda(self, expr):
            return "+".join(self.rec(b) for _, b in sorted(expr.bindings.items()))

    assert ByValue()(x1 + x2) == "x+x"
    with pytest.raises(CacheCollisionError) as err:
        ByValue(err_on_collision=True)(x1 + x2)
    assert isinstance(err.value, ValueError)
    assert isinstance(err.value, diagnostic.PytatoLikeError)
    assert "Placeholder" in str(err.value)


def test_mapper_created_duplicate_error():
    x = pt.make_placeholder("x", (2,), np.float64)

    class NeedlessCopy(CopyMapper):
        def map_placeholder(self, expr):
            return pt.make_placeholder(expr.name, expr.shape, expr.dtype)

    assert NeedlessCopy()(x + 1) == x + 1
    with pytest.raises(MapperCreatedDuplicateError) as err:
        NeedlessCopy(err_on_created_duplicate=True)(x + 1)
    assert isinstance(err.value, ValueError)
    assert "Placeholder" in str(err.value)


def test_foreign_object_error():
    with pytest.raises(ForeignObjectError) as err:
        CopyMapper()(42)
    # caught as pytato users catch it, and as our typed error
    assert isinstance(err.value, ValueError)
    assert isinstance(err.value, diagnostic.NotAnArrayError)
    assert "int" in str(err.value)

# }}}


# {{{ MPMSMaterializer

def _list_of_users(outputs):
    from pytato_like.transform._graph import data_operands, toposort
    users = {}
    for node in toposort(outputs, data_operands):
        for operand in data_operands(node):
            users.setdefault(operand, []).append(node)
    return users


def test_mpms_materializer_matches_materialize_with_mpms():
    a = pt.make_placeholder("a", (4,), np.float64)
    b = pt.make_placeholder("b", (4,), np.float64)
    t = a * b  # two materialized predecessors, two successors: stored
    o1, o2 = t + 1, pt.exp(t)
    u = a + 1  # one materialized predecessor: inlined
    o3 = u * u
    mapper = MPMSMaterializer(_list_of_users([o1, o2, o3]),
                              frozenset([a, b, o1, o2, o3]))
    r1, r2, r3 = (mapper(o).expr for o in (o1, o2, o3))
    assert isinstance(mapper(o1), MPMSMaterializerAccumulator)
    assert ImplStored() in r1.bindings["_in0"].tags
    assert r1.bindings["_in0"] is r2.bindings["_in0"]
    assert ImplStored() not in r3.bindings["_in0"].tags
    reference = pt.materialize_with_mpms(
        pt.make_dict_of_named_arrays({"o1": o1, "o2": o2, "o3": o3}))
    assert reference["o1"].expr == r1 and reference["o3"].expr == r3
    a_val, b_val = np.arange(4.0), np.ones(4) * 2
    np.testing.assert_allclose(pt.generate_numpy(r2)(a=a_val, b=b_val),
                               np.exp(a_val * b_val))


def test_deep_mpms_materializer(deep_chain):
    x, y = deep_chain
    mapper = MPMSMaterializer(_list_of_users([y]), frozenset([x, y]))
    acc = mapper(y)
    # a chain has one materialized predecessor everywhere: nothing stored;
    # the output counts as materialized itself
    assert acc.expr is y and acc.materialized_predecessors == {y}
    assert mapper(y.bindings["_in0"]).materialized_predecessors == {x}

# }}}


# {{{ lowering to index lambdas

def _lowerable_examples():
    x = pt.make_placeholder("x", (3, 4), np.float64)
    v = pt.make_placeholder("v", (4,), np.float64)
    return x, v, [
        pt.einsum("ij,j->i", x, v), x.reshape(4, 3), x.reshape(12, order="F"),
        x.T, pt.roll(x, 2, axis=1), x[1:, ::2], x[:, np.array([3, 0])],
        pt.concatenate([x, 2 * x], axis=0), pt.stack([x, x + 1], axis=1),
    ]


def test_to_index_lambda_mapper_lowers_one_node():
    x, v, exprs = _lowerable_examples()
    x_val = np.arange(12.0).reshape(3, 4)
    v_val = np.array([1.0, -1.0, 2.0, 0.5])
    for expr in exprs:
        lowered = ToIndexLambdaMapper()(expr)
        assert isinstance(lowered, pt.IndexLambda)
        ref = pt.generate_numpy(expr)(x=x_val, v=v_val) \
            if v in pt.transform.InputGatherer()(expr) \
            else pt.generate_numpy(expr)(x=x_val)
        got = pt.generate_numpy(lowered)(x=x_val, v=v_val) \
            if v in pt.transform.InputGatherer()(expr) \
            else pt.generate_numpy(lowered)(x=x_val)
        np.testing.assert_allclose(got, ref)
    with pytest.raises(diagnostic.CannotBeLoweredToIndexLambda):
        ToIndexLambdaMapper()(x)


class LowerAll(ToIndexLambdaMixin, CopyMapper):
    """pytato's idiom: the lowering mixin in front of a copy mapper."""


def test_to_index_lambda_mixin_lowers_a_whole_dag():
    x, v, exprs = _lowerable_examples()
    result = pt.make_dict_of_named_arrays(
        {f"r{i}": e for i, e in enumerate(exprs)})
    lowered = LowerAll()(result)
    kinds = {type(n).__name__ for n in pt.transform.DependencyMapper()(lowered)}
    # (the integer index array is wrapped data)
    assert kinds <= {"IndexLambda", "Placeholder", "DataWrapper"}
    x_val = np.arange(12.0).reshape(3, 4)
    v_val = np.array([1.0, -1.0, 2.0, 0.5])
    ref = pt.generate_numpy(result)(x=x_val, v=v_val)
    got = pt.generate_numpy(lowered)(x=x_val, v=v_val)
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name])


def test_deep_to_index_lambda_mixin():
    x = pt.make_placeholder("x", (3,), np.float64)
    y = x
    for _ in range(100_000):
        y = pt.roll(y, 1, axis=0)
    lowered = LowerAll()(y)
    assert isinstance(lowered, pt.IndexLambda)
    x_val = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(pt.generate_numpy(lowered)(x=x_val),
                               np.roll(x_val, 100_000))
    assert isinstance(ToIndexLambdaMapper()(y), pt.IndexLambda)

# }}}


def test_node_collector_and_collect_nodes():
    from pytato_like.transform import NodeCollector, collect_nodes
    x = pt.make_placeholder("x", (3, 4), np.float64)
    e = pt.einsum("ij,ij->i", x, x)
    expr = pt.sin(e) + (x @ x.T).sum(axis=1)
    einsums = collect_nodes(expr, lambda n: isinstance(n, pt.Einsum))
    assert len(einsums) == 2 and e in einsums
    assert NodeCollector(lambda n: n.ndim == 2)(expr) == {
        n for n in pt.transform.DependencyMapper()(expr) if n.ndim == 2}


def test_deep_node_collector(deep_chain):
    from pytato_like.transform import collect_nodes
    x, y = deep_chain
    assert collect_nodes(y, lambda n: isinstance(n, pt.Placeholder)) == {x}
    assert len(collect_nodes(y, lambda n: isinstance(n, pt.IndexLambda))) \
        == 200_000


def test_pytato_helper_methods_for_shapes_and_indices():
    from pytato_like.transform import WalkMapper
    n = pt.make_size_param("n")
    m = pt.make_size_param("m")
    x = pt.make_placeholder("x", (n, 3), np.float64)

    class RenameSize(CopyMapper):
        def map_size_param(self, expr):
            return m if expr.name == "n" else expr

        def map_placeholder(self, expr):
            return pt.make_placeholder(expr.name, self.rec_size_tuple(expr.shape),
                                       expr.dtype)

    new = RenameSize()(2 * x)
    assert new.bindings["_in0"].shape == (m, 3)
    assert CopyMapper().rec_size_tuple(x.shape) is x.shape

    class ShapeParams(CombineMapper[frozenset, None]):
        def combine(self, *args):
            return frozenset().union(*args)

        def map_size_param(self, expr):
            return frozenset([expr.name])

        def map_placeholder(self, expr):
            return self.combine(*self.rec_idx_or_size_tuple(expr.shape))

    assert ShapeParams()(x + 1) == {"n"}

    names = []

    class Walk(WalkMapper):
        def map_placeholder(self, expr):
            self.rec_idx_or_size_tuple(expr.shape)

        def map_size_param(self, expr):
            names.append(expr.name)

    Walk()(x * 2)
    # one path through the product's own shape, one through the placeholder's
    assert names == ["n", "n"]


def test_unsupported_array_error_where_pytato_users_catch_it():
    from pytato_like.transform import Mapper, UnsupportedArrayError

    class OnlyPlaceholders(Mapper):
        def map_placeholder(self, expr):
            return expr.name

    x = pt.make_placeholder("x", (2,), np.float64)
    assert OnlyPlaceholders()(x) == "x"
    with pytest.raises(UnsupportedArrayError, match="map_index_lambda"):
        OnlyPlaceholders()(x + 1)
