"""Tags on arrays and axes: tagged, without_tags, with_tagged_axis, unique
tags, equality/hashing and pickling with tags."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from pytools.tag import NonUniqueTagError, Tag, UniqueTag, tag_dataclass

import pytato_like as pt
from pytato_like.diagnostic import AxisError
from pytato_like.tags import ImplInlined, ImplStored, Named, PrefixNamed


@tag_dataclass
class Colour(Tag):
    name: str


@tag_dataclass
class Layout(UniqueTag):
    kind: str


@pytest.fixture
def x():
    return pt.make_placeholder("x", (3, 4), np.float64)


def test_tagged_returns_a_new_array_with_the_tag(x):
    y = x + 1
    t = y.tagged(ImplStored())
    assert t is not y
    assert t.tags == frozenset({ImplStored()})
    assert y.tags == frozenset()
    assert t.tagged(ImplStored()) is t  # already there
    both = t.tagged([Colour("red"), Named("tmp")])
    assert both.tags == {ImplStored(), Colour("red"), Named("tmp")}


def test_without_tags_removes_them(x):
    t = x.tagged([Colour("red"), Colour("blue")])
    assert t.without_tags(Colour("red")).tags == {Colour("blue")}
    assert t.without_tags([Colour("red"), Colour("blue")]).tags == frozenset()
    assert x.without_tags(Colour("red"), verify_existence=False) is x
    with pytest.raises(ValueError, match="red"):
        x.without_tags(Colour("red"))


def test_with_tagged_axis(x):
    t = x.with_tagged_axis(1, Colour("red"))
    assert t.axes[1].tags == {Colour("red")}
    assert t.axes[0].tags == frozenset()
    assert x.axes[1].tags == frozenset()
    t2 = t.with_tagged_axis(-1, Layout("contiguous"))
    assert t2.axes[1].tags == {Colour("red"), Layout("contiguous")}
    with pytest.raises(AxisError, match=r"axis 2.*\(3, 4\)"):
        x.with_tagged_axis(2, Colour("red"))


def test_unique_tags_conflict(x):
    with pytest.raises(NonUniqueTagError):
        x.tagged([ImplStored(), ImplInlined()])
    with pytest.raises(NonUniqueTagError):
        x.tagged(ImplStored()).tagged(ImplInlined())
    with pytest.raises(NonUniqueTagError):
        x.tagged(Named("a")).tagged(PrefixNamed("b"))
    with pytest.raises(NonUniqueTagError):
        x.with_tagged_axis(0, Layout("a")).with_tagged_axis(0, Layout("b"))
    with pytest.raises(NonUniqueTagError):
        pt.make_placeholder("y", (2,), tags=frozenset({Layout("a"), Layout("b")}))
    # non-unique tags of one class coexist
    assert len(x.tagged([Colour("a"), Colour("b")]).tags) == 2


def test_tags_take_part_in_equality_and_hashing(x):
    a = (x * 2).tagged(Colour("red"))
    b = (x * 2).tagged(Colour("red"))
    c = (x * 2).tagged(Colour("blue"))
    assert a == b and hash(a) == hash(b)
    assert a != c
    assert a != x * 2
    assert x.with_tagged_axis(0, Colour("red")) != x
    assert (x.with_tagged_axis(0, Colour("red"))
            == x.with_tagged_axis(0, Colour("red")))
    # a tag deep inside a DAG makes the DAGs differ
    assert pt.sum(a + 1) != pt.sum(c + 1)


def test_placeholder_tags_and_axes_at_construction():
    axes = (pt.Axis(frozenset({Colour("row")})), pt.Axis())
    p = pt.make_placeholder("p", (2, 3), np.float32, axes=axes,
                            tags=frozenset({Named("p_storage")}))
    assert p.axes == axes
    assert p.tags == {Named("p_storage")}
    with pytest.raises(AxisError, match=r"\(2, 3\).*1"):
        pt.make_placeholder("q", (2, 3), axes=(pt.Axis(),))


def test_tags_survive_pickling(x):
    y = pt.sum(x.tagged(Colour("in")) * 2, axis=0).tagged(ImplStored())
    y = y.with_tagged_axis(0, Layout("contiguous"))
    restored = pickle.loads(pickle.dumps(y))
    assert restored == y
    assert restored.tags == {ImplStored()}
    assert restored.axes[0].tags == {Layout("contiguous")}
    inner = restored.bindings["_in0"].bindings["_in0"]
    assert inner.tags == {Colour("in")}
    d = pt.make_dict_of_named_arrays({"y": y}, tags=frozenset({Colour("result")}))
    restored_d = pickle.loads(pickle.dumps(d))
    assert restored_d.tags == {Colour("result")}
    assert restored_d == d


def test_tags_do_not_change_values(x):
    a = np.arange(12.0).reshape(3, 4)
    y = (x.tagged(ImplStored()) * 2).with_tagged_axis(0, Colour("c"))
    np.testing.assert_array_equal(pt.generate_numpy(y)(x=a), a * 2)


def test_einsum_and_dict_tags(x):
    e = pt.einsum("ij->j", x, tags=frozenset({Colour("e")}))
    assert e.tags == {Colour("e")}
    d = pt.make_dict_of_named_arrays({"e": e}).tagged(Colour("d"))
    assert d.tags == {Colour("d")}
    assert d.without_tags(Colour("d")).tags == frozenset()


def test_copy_keeps_tags_unless_replaced(x):
    t = (x + 1).tagged(Colour("red"))
    assert t.copy().tags == {Colour("red")}
    assert t.copy(tags=frozenset()).tags == frozenset()
    assert t.replace_if_different(tags=t.tags) is t
