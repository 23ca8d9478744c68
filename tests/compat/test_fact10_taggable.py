"""Issue 34, item 4: pytools' Taggable protocol on ``Array``, ``Axis`` and
``ReductionDescriptor``, and user node classes declared as pytato declares
its own: frozen dataclasses with ``_SuppliedAxesAndTagsMixin`` (or
subclasses of a node class with extra fields).

Taggable behaviour is checked against pytools' own implementation on a
reference class; values against NumPy."""

from __future__ import annotations

import dataclasses
import pickle
from typing import ClassVar

import numpy as np
import pymbolic.primitives as prim
import pytest
from pytools.tag import (
    NonUniqueTagError,
    Tag,
    Taggable,
    UniqueTag,
    tag_dataclass,
)

import pytato_like as pt
from pytato_like import diagnostic
from pytato_like import transform as tr
from pytato_like.analysis import get_num_nodes
from pytato_like.array import (
    Array,
    IndexLambda,
    Placeholder,
    _SuppliedAxesAndTagsMixin,
    _SuppliedShapeAndDtypeMixin,
)
from pytato_like.scalar_expr import index_vars


@tag_dataclass
class Colour(Tag):
    name: str


@tag_dataclass
class Layout(UniqueTag):
    kind: str


@tag_dataclass
class Storage(UniqueTag):
    pass


@tag_dataclass
class OnDisk(Storage):
    pass


@tag_dataclass
class InMemory(Storage):
    pass


# {{{ the Taggable protocol, against pytools' implementation

@dataclasses.dataclass(frozen=True)
class Reference(Taggable):
    """pytools' Taggable as pytools implements it: the reference."""

    tags: frozenset[Tag] = frozenset()

    def _with_new_tags(self, tags: frozenset[Tag]) -> Reference:
        return Reference(tags)


def _placeholder():
    return pt.make_placeholder("x", (3, 4), np.float64)


def _index_lambda():
    return _placeholder() * 2 + 1


def _axis():
    return pt.Axis()


def _reduction_descriptor():
    s = pt.sum(_placeholder(), axis=1)
    (descr,) = s.var_to_reduction_descr.values()
    return descr


SUBJECTS = [_placeholder, _index_lambda, _axis, _reduction_descriptor]

#: operations as (method, args, kwargs), applied in sequence
OPERATIONS = [
    ("tagged", (Colour("red"),), {}),
    ("tagged", ([Colour("blue"), Layout("rows")],), {}),
    ("tagged", (Colour("red"),), {}),                 # already there
    ("tagged", (frozenset(),), {}),                   # nothing to add
    ("tagged", (Layout("columns"),), {}),             # UniqueTag clash
    ("tagged", ([OnDisk(), InMemory()],), {}),        # clash in one call
    ("tagged", (OnDisk(),), {}),
    ("tagged", (InMemory(),), {}),                    # clash with a sibling
    ("without_tags", (Colour("red"),), {}),
    ("without_tags", (Colour("green"),), {}),         # absent
    ("without_tags", (Colour("green"),), {"verify_existence": False}),
    ("without_tags", ([Colour("blue"), OnDisk()],), {}),
    ("without_tags", (Layout("rows"),), {"verify_existence": False}),
]


def _apply(obj, method, args, kwargs):
    try:
        new = getattr(obj, method)(*args, **kwargs)
    except Exception as err:  # noqa: BLE001
        return obj, ("raised", type(err))
    return new, ("ok", new.tags, new is obj)


@pytest.mark.parametrize("make", SUBJECTS, ids=lambda f: f.__name__[1:])
def test_taggable_protocol_matches_pytools(make):
    obj = make()
    assert isinstance(obj, Taggable)
    ref = Reference(obj.tags)
    for method, args, kwargs in OPERATIONS:
        obj, got = _apply(obj, method, args, kwargs)
        ref, expected = _apply(ref, method, args, kwargs)
        if expected[0] == "raised":
            assert got[0] == "raised", (method, args, got)
            # the same exception family pytools raises
            assert issubclass(got[1], expected[1]), (got[1], expected[1])
        else:
            assert got == expected, (method, args)
        for tag_t in (Colour, UniqueTag, Storage, Layout, Tag):
            assert obj.tags_of_type(tag_t) == ref.tags_of_type(tag_t)
            assert obj.tags_not_of_type(tag_t) == ref.tags_not_of_type(tag_t)
    assert type(obj) is type(make())


@pytest.mark.parametrize("make", SUBJECTS, ids=lambda f: f.__name__[1:])
def test_with_new_tags_sets_exactly_the_tags(make):
    obj = make().tagged(Colour("a"))
    new = obj._with_new_tags(frozenset({Layout("b")}))
    assert new.tags == frozenset({Layout("b")})
    assert obj.tags == frozenset({Colour("a")})
    assert type(new) is type(obj)


def test_errors_are_typed_and_name_the_array():
    x = _placeholder()
    with pytest.raises(diagnostic.NonUniqueTagError,
                       match=r"Placeholder of shape \(3, 4\).*Storage"):
        x.tagged(OnDisk()).tagged(InMemory())
    with pytest.raises(NonUniqueTagError, match=r"axis 1 of Placeholder"):
        x.with_tagged_axis(1, [Layout("a"), Layout("b")])
    with pytest.raises(diagnostic.TagNotPresentError,
                       match=r"Colour\(name='x'\).*Placeholder of shape"):
        x.without_tags(Colour("x"))
    # both are what pytools raises
    assert issubclass(diagnostic.NonUniqueTagError, NonUniqueTagError)
    assert issubclass(diagnostic.TagNotPresentError, ValueError)


def test_tagged_reduction_descriptor_and_axes_in_programs():
    x = _placeholder()
    s = pt.sum(x, axis=1)
    (var,) = s.var_to_reduction_descr
    t = s.with_tagged_reduction(var, Colour("sum"))
    assert t.var_to_reduction_descr[var].tags == {Colour("sum")}
    assert t.var_to_reduction_descr[var].tags_of_type(Colour) == {
        Colour("sum")}
    assert t != s
    assert t.with_tagged_reduction(var, Colour("sum")) is t
    with pytest.raises(diagnostic.NonUniqueTagError,
                       match=r"reduction '_r0' of the IndexLambda of shape"):
        t.with_tagged_reduction(var, [OnDisk(), InMemory()])
    y = t.with_tagged_axis(0, Layout("rows"))
    assert y.axes[0].tags_of_type(UniqueTag) == {Layout("rows")}
    assert y.with_tagged_axis(0, Layout("rows")) is y
    xv = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(pt.generate_numpy(y)(x=xv), xv.sum(axis=1))


def test_dict_of_named_arrays_is_taggable():
    d = pt.make_dict_of_named_arrays({"y": _index_lambda()})
    assert isinstance(d, Taggable)
    t = d.tagged(Colour("out"))
    assert t.tags == {Colour("out")} and t.tagged(Colour("out")) is t
    with pytest.raises(ValueError):
        d.without_tags(Colour("out"))
    assert d.without_tags(Colour("out"), verify_existence=False) is d
    assert t.without_tags(Colour("out")) == d

# }}}


# {{{ user node classes as frozen dataclasses

@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Scale(_SuppliedAxesAndTagsMixin, Array):
    """*array* times *factor*: a new node kind, declared as pytato's."""

    array: Array
    factor: float

    _mapper_method: ClassVar[str] = "map_scale"

    @property
    def shape(self):
        return self.array.shape

    @property
    def dtype(self):
        return self.array.dtype

    def to_index_lambda(self) -> IndexLambda:
        x = prim.Subscript(prim.Variable("a"), tuple(index_vars(self.ndim)))
        return IndexLambda(self.dtype.type(self.factor) * x, self.shape,
                           self.dtype, {"a": self.array}, None,
                           axes=self.axes, tags=self.tags)


@dataclasses.dataclass(frozen=True)   # eq=True and repr=True: the defaults
class Shift(_SuppliedAxesAndTagsMixin, Array):
    """*array* plus *offset*, declared without ``eq=False``."""

    array: Array
    offset: float

    _mapper_method: ClassVar[str] = "map_shift"

    @property
    def shape(self):
        return self.array.shape

    @property
    def dtype(self):
        return self.array.dtype

    def to_index_lambda(self) -> IndexLambda:
        x = prim.Subscript(prim.Variable("a"), tuple(index_vars(self.ndim)))
        return IndexLambda(x + self.dtype.type(self.offset), self.shape,
                           self.dtype, {"a": self.array}, None,
                           axes=self.axes, tags=self.tags)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class Fill(_SuppliedAxesAndTagsMixin, _SuppliedShapeAndDtypeMixin, Array):
    """An array of one value: shape and dtype are fields."""

    value: float

    _mapper_method: ClassVar[str] = "map_fill"

    def to_index_lambda(self) -> IndexLambda:
        return IndexLambda(self.dtype.type(self.value), self.shape, self.dtype,
                           {}, None, axes=self.axes, tags=self.tags)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class UnitPlaceholder(Placeholder):
    """A placeholder with a physical unit: a node class with a field more."""

    unit: str = "m"


XV = np.linspace(-1.0, 2.0, 12).reshape(3, 4)


def test_dataclass_node_construct_hash_eq():
    x = _placeholder()
    s = Scale(x, 2.0)
    assert s.shape == (3, 4) and s.dtype == np.float64
    assert s.axes == (pt.Axis(), pt.Axis()) and s.tags == frozenset()
    assert s == Scale(x, 2.0) and hash(s) == hash(Scale(x, 2.0))
    assert s != Scale(x, 3.0)
    assert s != Scale(_placeholder() + 0, 2.0)
    assert Scale(x, 2.0, tags=frozenset({Colour("c")})) != s
    # non_equality_tags take no part
    assert Scale(x, 2.0, non_equality_tags=frozenset({Colour("c")})) == s
    # frozen, as the decorator asked
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.factor = 3.0  # type: ignore[misc]
    assert [f.name for f in dataclasses.fields(s)] == [
        "axes", "tags", "non_equality_tags", "array", "factor"]
    # keyword construction as pytato's users write it
    k = Scale(array=x, factor=2.0, axes=(pt.Axis(), pt.Axis()),
              tags=frozenset())
    assert k == s


def test_dataclass_node_tagging():
    s = Scale(_placeholder(), 2.0)
    t = s.tagged(Colour("red"))
    assert type(t) is Scale and t.factor == 2.0 and t.array is s.array
    assert t.tags == {Colour("red")} and t.tagged(Colour("red")) is t
    assert t.without_tags(Colour("red")) == s
    a = s.with_tagged_axis(1, Layout("cols"))
    assert type(a) is Scale and a.axes[1].tags == {Layout("cols")}
    assert a != s
    with pytest.raises(NonUniqueTagError):
        Scale(s.array, 1.0, tags=frozenset({OnDisk(), InMemory()}))
    with pytest.raises(diagnostic.AxisError, match=r"Scale of shape \(3, 4\)"):
        Scale(s.array, 1.0, axes=(pt.Axis(),))


def test_dataclass_node_numpy_target():
    x = _placeholder()
    y = Scale(x, 2.0) + Shift(x, 0.5) * Fill((3, 4), np.float64, 3.0)
    out = pt.generate_numpy(y)(x=XV)
    np.testing.assert_allclose(out, 2.0 * XV + (XV + 0.5) * 3.0, rtol=1e-15)
    f = Fill(shape=(2,), dtype="int32", value=7)
    assert f.dtype == np.int32 and f.shape == (2,)
    np.testing.assert_array_equal(pt.generate_numpy(f + 1)(),
                                  np.full(2, 8, np.int32))


def test_dataclass_node_mappers():
    x = _placeholder()
    s = Scale(x, 2.0)
    y = Shift(s, 1.0) + s
    copied = tr.CopyMapper()(y)
    assert copied == y and hash(copied) == hash(y)
    assert get_num_nodes(y) == get_num_nodes(copied)
    assert tr.InputGatherer()(y) == frozenset({x})

    # pytato's idiom: a CopyMapper with a method for the new kind
    class DoubleScales(tr.CopyMapper):
        def map_scale(self, expr):
            return Scale(self.rec(expr.array), 2 * expr.factor,
                         axes=expr.axes, tags=expr.tags)

    doubled = DoubleScales()(y)
    assert doubled != y
    out = pt.generate_numpy(doubled)(x=XV)
    np.testing.assert_allclose(out, (4.0 * XV + 1.0) + 4.0 * XV, rtol=1e-15)

    # a WalkMapper sees each node class through map_* dispatch
    class Visits(tr.WalkMapper):
        def __init__(self):
            super().__init__()
            self.kinds = []

        def post_visit(self, expr):
            self.kinds.append(type(expr).__name__)

    v = Visits()
    v(y)
    assert sorted(set(v.kinds)) == ["IndexLambda", "Placeholder", "Scale",
                                    "Shift"]

    # a user's transform replacing the input reaches through the new nodes
    x2 = pt.make_placeholder("x2", (3, 4), np.float64)

    class Rename(tr.CopyMapper):
        def map_placeholder(self, expr):
            return x2 if expr is x else super().map_placeholder(expr)

    renamed = Rename()(y)
    assert tr.InputGatherer()(renamed) == frozenset({x2})
    np.testing.assert_allclose(pt.generate_numpy(renamed)(x2=XV),
                               (2 * XV + 1) + 2 * XV, rtol=1e-15)


def test_dataclass_node_pickle_and_repr():
    y = Shift(Scale(_placeholder(), 2.0).tagged(Colour("s")), 1.0)
    restored = pickle.loads(pickle.dumps(y))
    assert restored == y and type(restored) is Shift
    assert restored.array.tags == {Colour("s")}
    # Array's printer, not the dataclass one (which would recurse)
    assert "Shift" in repr(y) and "Scale" in repr(y)
    assert type(y).__repr__ is Array.__repr__
    assert type(y).__eq__ is Array.__eq__


def test_subclass_of_a_node_class_with_a_field_more():
    u = UnitPlaceholder("y", (3, 4), np.float64, unit="s")
    assert u.name == "y" and u.shape == (3, 4) and u.dtype == np.float64
    assert u == UnitPlaceholder("y", (3, 4), np.float64, unit="s")
    assert hash(u) == hash(UnitPlaceholder("y", (3, 4), "float64", unit="s"))
    assert u != UnitPlaceholder("y", (3, 4), np.float64)   # unit "m"
    assert u != pt.make_placeholder("y", (3, 4), np.float64)
    t = u.tagged(Colour("c")).with_tagged_axis(0, Layout("r"))
    assert type(t) is UnitPlaceholder and t.unit == "s"
    copied = tr.CopyMapper()(2 * t)
    assert copied == 2 * t
    assert pickle.loads(pickle.dumps(t)).unit == "s"
    np.testing.assert_array_equal(pt.generate_numpy(2 * t + 1)(y=XV),
                                  2 * XV + 1)
    # pytato's node classes are dataclasses; so are these
    assert [f.name for f in dataclasses.fields(Placeholder)] == [
        "name", "shape", "dtype", "axes", "tags", "non_equality_tags"]
    r = dataclasses.replace(pt.make_placeholder("z", (2,)), name="w")
    assert r == pt.make_placeholder("w", (2,))


def test_subclass_of_index_lambda():
    @dataclasses.dataclass(frozen=True, eq=False, repr=False)
    class NotedLambda(IndexLambda):
        note: str = ""

    y = _placeholder() * 3
    n = NotedLambda(y.expr, y.shape, y.dtype, y.bindings,
                    y.var_to_reduction_descr, note="triple")
    assert n.note == "triple" and n != y
    assert n == NotedLambda(y.expr, y.shape, y.dtype, y.bindings,
                            y.var_to_reduction_descr, note="triple")
    np.testing.assert_array_equal(pt.generate_numpy(n)(x=XV), 3 * XV)


@dataclasses.dataclass(frozen=True, eq=False, repr=False)
class WeightedSum(_SuppliedAxesAndTagsMixin, Array):
    """A node with a tuple of arrays as one field."""

    arrays: tuple[Array, ...]
    weights: tuple[float, ...]

    _mapper_method: ClassVar[str] = "map_weighted_sum"

    @property
    def shape(self):
        return self.arrays[0].shape

    @property
    def dtype(self):
        return self.arrays[0].dtype

    def to_index_lambda(self) -> IndexLambda:
        idx = tuple(index_vars(self.ndim))
        expr = sum(w * prim.Subscript(prim.Variable(f"a{i}"), idx)
                   for i, w in enumerate(self.weights))
        return IndexLambda(expr, self.shape, self.dtype,
                           {f"a{i}": a for i, a in enumerate(self.arrays)},
                           None, axes=self.axes, tags=self.tags)


def test_dataclass_node_with_a_tuple_of_arrays():
    x = _placeholder()
    z = pt.make_placeholder("z", (3, 4), np.float64)
    w = WeightedSum((x, 2 * z, x), (0.5, 1.0, 2.0))
    assert dict(w._fields)["arrays"].holds_arrays
    assert w == WeightedSum((x, 2 * z, x), (0.5, 1.0, 2.0))
    assert w != WeightedSum((x, 2 * z, z), (0.5, 1.0, 2.0))
    assert tr.InputGatherer()(w) == frozenset({x, z})
    zv = XV[::-1].copy()
    np.testing.assert_allclose(pt.generate_numpy(w)(x=XV, z=zv),
                               2.5 * XV + 2 * zv, rtol=1e-15)
    x2 = pt.make_placeholder("x2", (3, 4), np.float64)

    class Rename(tr.CopyMapper):
        def map_placeholder(self, expr):
            return x2 if expr is x else super().map_placeholder(expr)

    renamed = Rename()(w)
    assert renamed.arrays[0] is x2 and renamed.arrays[2] is x2
    assert pickle.loads(pickle.dumps(renamed)) == renamed


def test_unusable_dataclass_nodes_raise_typed_errors():
    @dataclasses.dataclass(frozen=True, eq=False)
    class NoMapperMethod(_SuppliedAxesAndTagsMixin, Array):
        array: Array

        @property
        def shape(self):
            return self.array.shape

        @property
        def dtype(self):
            return self.array.dtype

    with pytest.raises(diagnostic.NotAnArrayError,
                       match="NoMapperMethod.*_mapper_method"):
        NoMapperMethod(_placeholder())

    @dataclasses.dataclass(frozen=True, eq=False)
    class NoShape(_SuppliedAxesAndTagsMixin, Array):
        value: int
        _mapper_method: ClassVar[str] = "map_no_shape"

    with pytest.raises(diagnostic.NotAnArrayError, match="NoShape.*shape"):
        NoShape(1)


def test_deep_chain_of_dataclass_nodes():
    # 100 000 nested user nodes at the default recursion limit: construct,
    # hash, compare, copy, walk, pickle, print and evaluate
    def build():
        x = pt.make_placeholder("x", (3,))
        y = x
        for i in range(100_000):
            y = Shift(y, 1.0) if i % 2 else Scale(y, -1.0)
        return y

    y = build()
    other = build()
    assert hash(y) == hash(other) and y == other
    copied = tr.CopyMapper()(y)
    assert copied == y
    assert get_num_nodes(y) == 100_001
    assert pickle.loads(pickle.dumps(y)) == y
    assert "Shift" in repr(y)
    out = pt.generate_numpy(y)(x=np.array([0.0, 1.0, 2.0]))
    # each pair of steps maps v to -v + 1: 50 000 pairs return v
    np.testing.assert_array_equal(out, [0.0, 1.0, 2.0])

# }}}
