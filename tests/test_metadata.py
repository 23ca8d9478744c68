"""Axis-tag inference (:func:`pytato_like.transform.metadata.unify_axes_tags`):
tags placed on inputs reach the axes indexed by the same index downstream
(and upstream), reduction descriptors, and no other axis."""

from __future__ import annotations

import numpy as np
import pytest
from pytools.tag import NonUniqueTagError, Tag, UniqueTag, tag_dataclass

import pytato_like as pt
from pytato_like._traversal import topological_order
from pytato_like.transform.metadata import (
    AxesTagsEquationCollector,
    AxisIgnoredForPropagationTag,
    unify_axes_tags,
)


@tag_dataclass
class ElementAxis(Tag):
    pass


@tag_dataclass
class DOFAxis(Tag):
    pass


@tag_dataclass
class EntityTag(UniqueTag):
    """A family of unique tags: one axis indexes one kind of entity."""


@tag_dataclass
class Elements(EntityTag):
    pass


@tag_dataclass
class Faces(EntityTag):
    pass


def _tags(ary, iaxis):
    return set(ary.axes[iaxis].tags)


def _unified(**arrays):
    out = unify_axes_tags(pt.make_dict_of_named_arrays(arrays))
    return {name: out._data[name] for name in arrays}


def test_elementwise_with_broadcasting():
    x = pt.make_placeholder("x", (5, 3)).with_tagged_axis(0, ElementAxis())
    y = pt.make_placeholder("y", (1, 3)).with_tagged_axis(1, DOFAxis())
    z = pt.make_placeholder("z", (3,))
    r = _unified(out=pt.sin(x) * y + z)
    out = r["out"]
    assert _tags(out, 0) == {ElementAxis()}
    assert _tags(out, 1) == {DOFAxis()}
    inputs = {node.name: node for node in topological_order([out])
              if isinstance(node, pt.Placeholder)}
    # equal axes in both directions: x's axis 1 and z's axis 0 get the DOF tag
    assert _tags(inputs["x"], 1) == {DOFAxis()}
    assert _tags(inputs["z"], 0) == {DOFAxis()}
    # y's broadcast axis 0 (extent 1) is not the element axis
    assert _tags(inputs["y"], 0) == set()


def test_values_are_unchanged():
    x = pt.make_placeholder("x", (4, 3)).with_tagged_axis(0, ElementAxis())
    expr = pt.sum(x.T @ x, axis=0) + pt.roll(x, 1, axis=0)[0]
    tagged = unify_axes_tags(expr)
    value = np.random.default_rng(0).random((4, 3))
    np.testing.assert_allclose(pt.generate_numpy(tagged)(x=value),
                               pt.generate_numpy(expr)(x=value))


def test_shape_operations_keep_the_right_axes():
    x = (pt.make_placeholder("x", (4, 3, 2))
         .with_tagged_axis(0, ElementAxis()).with_tagged_axis(1, DOFAxis()))
    r = _unified(
        perm=pt.transpose(x, (2, 0, 1)),
        expand=pt.expand_dims(x, 1),
        squeeze=pt.squeeze(pt.expand_dims(x, 0)),
        merge=pt.reshape(x, (12, 2)),
        concat=pt.concatenate([x, x], axis=0),
        stack=pt.stack([x, x], axis=1),
        basic=x[1:3, :, 0],
        full_slice=x[:, :, 1],
        adv=x[:, pt.make_placeholder("i", (5,), np.int64)],
        roll=pt.roll(x, 1, axis=0),
    )
    assert [_tags(r["perm"], i) for i in range(3)] == [set(), {ElementAxis()},
                                                       {DOFAxis()}]
    assert [_tags(r["expand"], i) for i in range(4)] == [
        {ElementAxis()}, set(), {DOFAxis()}, set()]
    assert [_tags(r["squeeze"], i) for i in range(3)] == [
        {ElementAxis()}, {DOFAxis()}, set()]
    # merged axes are neither elements nor DOFs
    assert _tags(r["merge"], 0) == set()
    # the concatenated axis is not the element axis; the others are kept
    assert [_tags(r["concat"], i) for i in range(3)] == [set(), {DOFAxis()}, set()]
    assert [_tags(r["stack"], i) for i in range(4)] == [
        {ElementAxis()}, set(), {DOFAxis()}, set()]
    # a proper sub-range is not the element axis, the full slice is
    assert [_tags(r["basic"], i) for i in range(2)] == [set(), {DOFAxis()}]
    assert [_tags(r["full_slice"], i) for i in range(2)] == [
        {ElementAxis()}, {DOFAxis()}]
    assert [_tags(r["adv"], i) for i in range(3)] == [{ElementAxis()}, set(), set()]
    assert [_tags(r["roll"], i) for i in range(3)] == [set(), {DOFAxis()}, set()]


def test_reductions_tag_their_descriptors():
    x = (pt.make_placeholder("x", (4, 3))
         .with_tagged_axis(0, ElementAxis()).with_tagged_axis(1, DOFAxis()))
    r = _unified(s=pt.sum(x, axis=1), m=pt.amax(x, axis=0))
    assert _tags(r["s"], 0) == {ElementAxis()}
    (descr,) = r["s"].var_to_reduction_descr.values()
    assert set(descr.tags) == {DOFAxis()}
    (descr,) = r["m"].var_to_reduction_descr.values()
    assert set(descr.tags) == {ElementAxis()}
    no_descr = unify_axes_tags(pt.sum(x, axis=1), unify_redn_descrs=False)
    (descr,) = no_descr.var_to_reduction_descr.values()
    assert set(descr.tags) == set()


def test_tag_on_a_reduction_descriptor_reaches_the_reduced_axis():
    from pytato_like.array import ReductionDescriptor
    x = pt.make_placeholder("x", (4, 3))
    s = pt.sum(x, axis=1)
    (name,) = s.var_to_reduction_descr
    s = s.copy(var_to_reduction_descr={name: ReductionDescriptor(
        frozenset({DOFAxis()}))})
    out = unify_axes_tags(s)
    (xx,) = [n for n in topological_order([out]) if isinstance(n, pt.Placeholder)]
    assert _tags(xx, 1) == {DOFAxis()} and _tags(xx, 0) == set()


def test_dg_like_einsum_operators():
    """A DG-style volume term: reference derivative matrices applied to
    element-wise DOFs, times geometric factors, summed over dimensions."""
    nel, ndofs, dim = 10, 6, 2
    u = (pt.make_placeholder("u", (nel, ndofs))
         .with_tagged_axis(0, ElementAxis()).with_tagged_axis(1, DOFAxis()))
    diff = pt.make_data_wrapper(np.ones((dim, ndofs, ndofs)), name="diff_mat")
    jac = pt.make_placeholder("jac", (dim, nel))
    ref_deriv = pt.einsum("rij,ej->rei", diff, u)
    phys = pt.einsum("re,rei->ei", jac, ref_deriv)
    flux = pt.make_placeholder("flux", (nel, ndofs))
    rhs = phys - flux
    r = _unified(rhs=rhs, ref=ref_deriv)

    assert [_tags(r["rhs"], i) for i in range(2)] == [{ElementAxis()}, set()]
    assert [_tags(r["ref"], i) for i in range(3)] == [set(), {ElementAxis()}, set()]
    nodes = {getattr(n, "name", None): n for n in topological_order([r["rhs"]])}
    # the contracted axis of the matrix is the DOF axis of u; its rows are
    # not known to be DOFs (no equation relates them), as in pytato
    assert [_tags(nodes["diff_mat"], i) for i in range(3)] == [set(), set(),
                                                               {DOFAxis()}]
    assert [_tags(nodes["jac"], i) for i in range(2)] == [set(), {ElementAxis()}]
    assert _tags(nodes["flux"], 0) == {ElementAxis()}
    ref = r["ref"]
    (descr,) = ref.redn_axis_to_redn_descr.values()
    assert set(descr.tags) == {DOFAxis()}

    # tagging the matrix's rows as DOFs spreads to every DOF axis downstream
    diff_rows = diff.with_tagged_axis(1, DOFAxis())
    out = unify_axes_tags(pt.einsum("re,rei->ei", jac,
                                    pt.einsum("rij,ej->rei", diff_rows, u)) - flux)
    assert [_tags(out, i) for i in range(2)] == [{ElementAxis()}, {DOFAxis()}]


def test_axis_ignored_for_propagation_cuts_the_path():
    u = pt.make_placeholder("u", (8, 4)).with_tagged_axis(1, DOFAxis())
    mat = pt.make_placeholder("mat", (4, 4))
    for i in range(2):
        mat = mat.with_tagged_axis(i, AxisIgnoredForPropagationTag())
    out = unify_axes_tags(pt.einsum("ij,ej->ei", mat, u))
    (m,) = [n for n in topological_order([out])
            if isinstance(n, pt.Placeholder) and n.name == "mat"]
    assert _tags(m, 1) == {AxisIgnoredForPropagationTag()}
    assert _tags(out, 1) == set()


def test_conflicting_tags_accumulate_or_raise_for_unique_tags():
    x = pt.make_placeholder("x", (4,)).with_tagged_axis(0, ElementAxis())
    y = pt.make_placeholder("y", (4,)).with_tagged_axis(0, DOFAxis())
    out = pt.unify_axes_tags(x + y)  # also exported at the top level
    assert _tags(out, 0) == {ElementAxis(), DOFAxis()}

    a = pt.make_placeholder("a", (4,)).with_tagged_axis(0, Elements())
    b = pt.make_placeholder("b", (4,)).with_tagged_axis(0, Faces())
    with pytest.raises(NonUniqueTagError,
                       match=r"axis 0 of Placeholder of shape \(4,\)"):
        unify_axes_tags(a * b)
    # only tags of tag_t propagate
    out = unify_axes_tags(x + y, tag_t=DOFAxis)
    assert _tags(out, 0) == {DOFAxis()}


def test_custom_collector_rules():
    class NoReshapeRule(AxesTagsEquationCollector):
        def map_reshape(self, expr):
            self.rec(expr.array)

    x = pt.make_placeholder("x", (4, 3)).with_tagged_axis(0, ElementAxis())
    expr = pt.expand_dims(x, 2)
    assert _tags(unify_axes_tags(expr), 0) == {ElementAxis()}
    assert _tags(unify_axes_tags(expr, equations_collector_t=NoReshapeRule),
                 0) == set()


def test_deep_chain(deep_chain):
    x, y = deep_chain
    tagged_x = x.with_tagged_axis(0, ElementAxis())
    out = unify_axes_tags(pt.transform.map_and_copy(
        y, lambda node: tagged_x if node is x else node))
    assert _tags(out, 0) == {ElementAxis()}
    inner = out.bindings["_in0"]
    assert _tags(inner, 0) == {ElementAxis()}
