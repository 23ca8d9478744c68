"""pytato_like.equality.EqualityComparer against hand-built pairs, and its
cost on DAGs whose naive recursive comparison is exponential.
(Deep DAGs: tests/test_transform_deep.py.)"""

from __future__ import annotations

import numpy as np

import pytato_like as pt
from pytato_like.equality import EqualityComparer
from pytato_like.tags import ImplStored


def build(name="x", scale=2.0):
    x = pt.make_placeholder(name, (3,))
    return pt.sin(x) * scale + x


def test_equal_dags_built_twice_compare_equal():
    a, b = build(), build()
    assert a is not b
    assert EqualityComparer()(a, b)


def test_differences_anywhere_make_dags_unequal():
    base = build()
    assert not EqualityComparer()(base, build(name="y"))      # input name
    assert not EqualityComparer()(base, build(scale=3.0))     # constant
    assert not EqualityComparer()(base, base.tagged(ImplStored()))  # tags
    assert not EqualityComparer()(base, base.with_tagged_axis(0, ImplStored()))
    x64 = pt.make_placeholder("x", (3,), np.float64)
    x32 = pt.make_placeholder("x", (3,), np.float32)
    assert not EqualityComparer()(x64, x32)                   # dtype
    assert not EqualityComparer()(x64, pt.make_placeholder("x", (4,)))  # shape


def test_data_wrappers_are_equal_only_with_the_same_data_object():
    data = np.arange(3.0)
    assert EqualityComparer()(pt.make_data_wrapper(data), pt.make_data_wrapper(data))
    assert not EqualityComparer()(pt.make_data_wrapper(data),
                                  pt.make_data_wrapper(data.copy()))


def test_dict_of_named_arrays_comparison():
    d1 = pt.make_dict_of_named_arrays({"a": build(), "b": build(scale=1.0)})
    d2 = pt.make_dict_of_named_arrays({"a": build(), "b": build(scale=1.0)})
    d3 = pt.make_dict_of_named_arrays({"a": build(), "c": build(scale=1.0)})
    d4 = pt.make_dict_of_named_arrays({"a": build(), "b": build(scale=5.0)})
    assert EqualityComparer()(d1, d2)
    assert not EqualityComparer()(d1, d3)
    assert not EqualityComparer()(d1, d4)
    assert not EqualityComparer()(d1, d1["a"])


def test_non_arrays_compare_by_value():
    assert EqualityComparer()(3, 3)
    assert not EqualityComparer()(3, pt.make_placeholder("x", ()))


def test_shared_subexpressions_are_compared_once():
    # Each level uses the previous one twice: 2**60 paths, 60 levels.
    def ladder():
        y = pt.make_placeholder("x", (2,))
        for _ in range(60):
            y = y * 0.5 + y
        return y

    assert EqualityComparer()(ladder(), ladder())
    other = ladder() * 1.0
    assert not EqualityComparer()(ladder() * 2.0, other)
