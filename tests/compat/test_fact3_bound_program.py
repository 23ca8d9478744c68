"""Fact 3 of the drop-in issue: the bound program object as pytato users
touch it -- ``.program`` (a loopy TranslationUnit), ``.bound_arguments``,
``.target``, ``.copy``, ``with_transformed_program`` (honoured by
execution), ``bind_to_context`` -- and the names importable from
``pytato_like.target.loopy``."""

from __future__ import annotations

import numpy as np
import pytest

import pymbolic.primitives as prim

import pytato_like as pt

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")
lp = pytest.importorskip("loopy")

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")

X = np.linspace(-1, 1, 100)


def _affine():
    x = pt.make_placeholder("x", (100,), np.float64)
    return 2 * x + 1


def test_names_importable_from_target_loopy():
    from pytato_like.target.loopy import (
        BoundProgram,
        BoundPyOpenCLProgram,
        ImplInlined,
        ImplStored,
        ImplSubstitution,
        ImplementationStrategy,
        LoopyPyOpenCLTarget,
    )
    prg = pt.generate_loopy(_affine())
    assert isinstance(prg, BoundPyOpenCLProgram)
    assert isinstance(prg, BoundProgram)
    assert isinstance(prg.target, LoopyPyOpenCLTarget)
    for strategy in (ImplInlined, ImplStored, ImplSubstitution):
        assert issubclass(strategy, ImplementationStrategy)
    # one class, wherever it is imported from
    assert pt.tags.ImplStored is ImplStored


def test_program_is_a_translation_unit_whose_code_runs(queue):
    prg = pt.generate_loopy(_affine())
    assert isinstance(prg.program, lp.TranslationUnit)
    # the translation unit is a real loopy program: run it with loopy itself
    (name,) = prg.program.entrypoints
    knl = prg.program[name]
    args = {a.name: a for a in knl.args}
    # sizes may be value arguments (one kernel for every size); loopy infers
    # them from the arrays' shapes, so only the array input is passed
    (in_name,) = [n for n, a in args.items()
                  if isinstance(a, lp.ArrayArg)
                  and n not in knl.get_written_variables()]
    (out_name,) = knl.get_written_variables() & set(args)
    _evt, out = prg.program.executor(queue.context, entrypoint=name)(
        queue, **{in_name: X})
    np.testing.assert_allclose(out[0] if isinstance(out, tuple) else out[out_name],
                               2 * X + 1)


def test_with_transformed_program_runs_the_transformed_kernels(queue):
    prg = pt.generate_loopy(_affine())

    def triple_instead_of_double(tu):
        # a semantic change, so the result proves which code ran
        (name,) = tu.entrypoints
        knl = tu[name]
        (insn,) = knl.instructions
        expr = insn.expression
        assert isinstance(expr, prim.Sum)
        new_expr = prim.Sum(tuple(
            prim.Product((3.0,) + tuple(c for c in t.children if c != 2.0))
            if isinstance(t, prim.Product) else t for t in expr.children))
        return tu.with_kernel(knl.copy(instructions=[insn.copy(expression=new_expr)]))

    changed = prg.with_transformed_program(triple_instead_of_double)
    _evt, (out,) = changed(queue, x=X)
    np.testing.assert_allclose(out, 3 * X + 1)
    # the original is untouched
    _evt, (orig,) = prg(queue, x=X)
    np.testing.assert_allclose(orig, 2 * X + 1)


def test_with_transformed_program_accepts_loopy_transformations(queue):
    prg = pt.generate_loopy(_affine())

    def split(tu):
        # pytato's unit is unscheduled: one loop over the one output axis
        (iname,) = tu.default_entrypoint.all_inames()
        # work-groups of 16 work-items
        return lp.split_iname(tu, iname, 16, inner_tag="l.0", outer_tag="g.0")

    split_prg = prg.with_transformed_program(split)
    assert "reqd_work_group_size(16" in split_prg.source
    assert "reqd_work_group_size(16" not in prg.source
    _evt, (out,) = split_prg(queue, x=X)
    np.testing.assert_allclose(out, 2 * X + 1)


def test_bound_arguments_and_copy_rebind_data(queue):
    data = np.arange(5.0)
    w = pt.make_data_wrapper(data, name="w")
    prg = pt.generate_loopy(w * w)
    assert set(prg.bound_arguments) == {"w"}
    np.testing.assert_array_equal(prg.bound_arguments["w"], data)
    _evt, (out,) = prg(queue)
    np.testing.assert_allclose(out, data * data)

    other = np.linspace(0, 1, 5)
    prg2 = prg.copy(bound_arguments={"w": other})
    _evt, (out2,) = prg2(queue)
    np.testing.assert_allclose(out2, other * other)
    with pytest.raises(pt.diagnostic.PytatoLikeError, match="nonexistent"):
        prg.copy(nonexistent=1)


def test_bind_to_context_runs_like_the_program(queue):
    x = pt.make_placeholder("x", (100,), np.float64)
    w = pt.make_data_wrapper(np.full(100, 0.5), name="w")
    prg = pt.generate_loopy({"y": x * w, "z": x + w})
    exe = prg.bind_to_context(queue.context)
    x_dev = cla.to_device(queue, X)
    _evt, out = exe(queue, x=x_dev)
    assert isinstance(out["y"], cla.Array)
    np.testing.assert_allclose(out["y"].get(), X * 0.5)
    np.testing.assert_allclose(out["z"].get(), X + 0.5)
    _evt, out_host = exe(queue, x=X, out_host=True)
    np.testing.assert_allclose(out_host["y"], X * 0.5)
