"""Issue 9, fact 4: the mapper classes are generic as pytato's are, so a
pytato user's module that subscripts them in class definitions imports and
its mappers compute what they compute with pytato.

Type parameters (pytato 2025): ``Mapper[ResultT, FunctionResultT, P]``,
``CachedMapper[ResultT, FunctionResultT, P]``, ``CombineMapper[ResultT,
FunctionResultT]``, ``TransformMapperWithExtraArgs[P]``,
``CopyMapperWithExtraArgs[P]``, ``WalkMapper[P]``, ``CachedWalkMapper[P]``,
``CachedMapperCache[CacheExprT, CacheResultT, P]``,
``TransformMapperCache[CacheExprT, P]``.
"""

from typing import Never

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.transform import (
    CachedMapper,
    CachedMapperCache,
    CachedWalkMapper,
    CombineMapper,
    CopyMapper,
    CopyMapperWithExtraArgs,
    Mapper,
    TopoSortMapper,
    TransformMapperCache,
    TransformMapperWithExtraArgs,
    WalkMapper,
)


class PlaceholderNames(CombineMapper[frozenset[str], Never]):
    """pytato's idiom: a combine mapper typed by what it returns."""

    def combine(self, *args: frozenset[str]) -> frozenset[str]:
        return frozenset().union(*args)

    def map_placeholder(self, expr) -> frozenset[str]:
        return frozenset([expr.name])


class Depth(CombineMapper[int, Never]):
    """Longest path (in nodes) from a node down to a leaf."""

    def combine(self, *args: int) -> int:
        return max(args, default=0)

    def map_placeholder(self, expr) -> int:
        return 1

    def map_index_lambda(self, expr) -> int:
        return 1 + self.combine(*(self.rec(b) for b in expr.bindings.values()))


class ScaleInputs(CopyMapperWithExtraArgs[[float]]):
    """Extra argument typed through the ParamSpec: every placeholder is
    multiplied by the factor passed down."""

    def map_placeholder(self, expr, factor: float):
        return factor * expr


class CountIndexLambdas(CachedMapper[int, Never, []]):
    def map_placeholder(self, expr) -> int:
        return 0

    def map_index_lambda(self, expr) -> int:
        return 1 + sum(self.rec(b) for b in expr.bindings.values())


class PostOrder(WalkMapper[[]]):
    def __init__(self):
        super().__init__()
        self.seen = []

    def post_visit(self, expr) -> None:
        self.seen.append(expr)


class Visited(CachedWalkMapper[[]]):
    def __init__(self):
        super().__init__()
        self.count = 0

    def post_visit(self, expr) -> None:
        self.count += 1


def test_combine_mapper_subscripted_with_never():
    x = pt.make_placeholder("x", (3,), np.float64)
    y = pt.make_placeholder("y", (3,), np.float64)
    expr = pt.sin(x) * 2 + y
    assert PlaceholderNames()(expr) == {"x", "y"}
    assert Depth()(expr) == 4  # x -> sin -> *2 -> +y


def test_cached_mapper_subscripted_maps_each_node_once():
    x = pt.make_placeholder("x", (3,), np.float64)
    shared = x + 1
    expr = shared * shared + shared
    # the product binds `shared` once: 1 + 1; the sum: 1 + product + shared
    assert CountIndexLambdas()(expr) == 1 + (1 + 1) + 1


def test_copy_mapper_with_extra_args_subscripted_by_paramspec():
    x = pt.make_placeholder("x", (4,), np.float64)
    expr = 2 * x + 1
    scaled = ScaleInputs()(expr, 3.0)
    x_val = np.arange(4.0)
    out = pt.generate_numpy(scaled)(x=x_val)
    np.testing.assert_allclose(out, 2 * (3.0 * x_val) + 1)


def test_walk_mappers_subscripted():
    x = pt.make_placeholder("x", (2,), np.float64)
    a = x + 1
    expr = a + pt.sin(a)  # two paths from expr down to a
    walk = PostOrder()
    walk(expr)
    # a WalkMapper visits once per path: a twice, x twice
    assert [type(n).__name__ for n in walk.seen].count("Placeholder") == 2
    assert walk.seen[-1] is expr
    cached = Visited()
    cached(expr)
    assert cached.count == 4  # x, a, sin(a), expr once each


def test_every_generic_base_is_subscriptable_as_in_pytato():
    # each of these is a TypeError at import time without Generic bases
    aliases = [
        Mapper[int, Never, []], CachedMapper[int, Never, [int]],
        CombineMapper[int, Never], TransformMapperWithExtraArgs[[int]],
        CopyMapperWithExtraArgs[[int, str]], WalkMapper[[int]],
        CachedWalkMapper[[]], CachedMapperCache[object, int, []],
        TransformMapperCache[object, []],
    ]
    assert all(alias.__origin__ is not None for alias in aliases)

    class Typed(CombineMapper[frozenset[int], Never]):
        def combine(self, *args):
            return frozenset().union(*args)

        def map_placeholder(self, expr):
            return frozenset([expr.ndim])

    assert Typed()(pt.make_placeholder("m", (2, 3))) == {2}


def test_non_generic_mappers_stay_plain_classes():
    # like pytato's, these fix their type parameters: subscripting is an error
    with pytest.raises(TypeError):
        TopoSortMapper[[]]
    with pytest.raises(TypeError):
        CopyMapper[int]


def test_generic_bases_keep_per_instance_state_separate():
    x = pt.make_placeholder("x", (2,))
    m1, m2 = Depth(), Depth()
    assert m1(x + 1) == 2
    assert len(m1._cache) > 0 and len(m2._cache) == 0


# {{{ deep DAGs: user subclasses recursing with self.rec

def test_deep_generic_combine_subclass(deep_chain):
    _, y = deep_chain
    # 200 000 index lambdas above the placeholder
    assert Depth()(y) == 200_001


def test_deep_generic_cached_mapper_subclass(deep_chain):
    _, y = deep_chain
    assert CountIndexLambdas()(y) == 200_000


def test_deep_generic_walk_subclasses(deep_chain):
    _, y = deep_chain
    walk = PostOrder()
    walk(y)
    assert len(walk.seen) == 200_001 and walk.seen[-1] is y
    cached = Visited()
    cached(y)
    assert cached.count == 200_001


def test_deep_generic_copy_with_extra_args_subclass(deep_chain):
    x, y = deep_chain
    scaled = ScaleInputs()(y, 1.0)
    # only the placeholder is rewritten (1.0 * x): one more node on top of x
    assert Depth()(scaled) == 200_002

# }}}


def test_subclass_of_a_node_class_gets_its_base_method():
    # pytato's dispatch: a node class without a method falls back along its
    # bases' _mapper_method names
    class TaggedInput(pt.Placeholder):
        __slots__ = ()
        _mapper_method = "map_tagged_input"

    x = TaggedInput("x", (3,), np.dtype(np.float64))
    assert PlaceholderNames()(pt.exp(x)) == {"x"}
    assert Depth()(pt.exp(x) + 1) == 3

    class Special(PlaceholderNames):
        def map_tagged_input(self, expr):
            return frozenset(["special " + expr.name])

    assert Special()(pt.exp(x)) == {"special x"}


def test_walk_of_a_node_subclass_uses_its_base_method():
    class TaggedInput(pt.Placeholder):
        __slots__ = ()
        _mapper_method = "map_tagged_input"

    seen = []

    class Inputs(WalkMapper[[]]):
        def map_placeholder(self, expr):
            seen.append(expr.name)

    Inputs()(pt.exp(TaggedInput("t", (2,), np.dtype(np.float64))) + 1)
    assert seen == ["t"]
