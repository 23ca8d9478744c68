"""Issue 34, items 2, 3 and 9: the loopy program is pytato's, executables
are handed out as pytato hands them out, and code importing ``pytato``
runs unchanged.

Written as arraycontext, meshmode and grudge use pytato: inspect the
translation unit (one entrypoint named ``function_name``, arguments named
after placeholders, data wrappers and outputs, temporaries after their
``Named`` tags), transform it (split and tag inames), call the executable
with ``queue=``. Every result is checked against NumPy.
"""

import subprocess
import sys
import textwrap

import loopy as lp
import numpy as np
import pytest
from _mpiexec import mpiexec_path

from pytools.tag import Tag, tag_dataclass

import pytato_like as pt
from pytato_like.tags import ForceValueArgTag, ImplStored, Named

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")

RNG = np.random.default_rng(7)
X = RNG.random((12, 5))
Y = RNG.random(5)


def _dag():
    x = pt.make_placeholder("x", (12, 5), np.float64)
    y = pt.make_placeholder("y", (5,), np.float64)
    scaled = (2 * x + 1).tagged((Named("scaled"), ImplStored()))
    return pt.make_dict_of_named_arrays({
        "rowsum": pt.sum(scaled * y, axis=1),
        "sq": scaled * scaled,
    })


def _reference():
    scaled = 2 * X + 1
    return {"rowsum": (scaled * Y).sum(axis=1), "sq": scaled * scaled}


def _check(out, queue=None):
    for name, ref in _reference().items():
        value = out[name]
        if not isinstance(value, np.ndarray):
            value = value.get(queue=queue)
        np.testing.assert_allclose(value, ref, rtol=1e-13)


# {{{ item 2: the translation unit

def test_one_entrypoint_named_like_the_function_with_pytato_argument_names():
    prg = pt.generate_loopy(_dag(), function_name="rhs")
    t_unit = prg.program
    assert isinstance(t_unit, lp.TranslationUnit)
    assert set(t_unit.entrypoints) == {"rhs"}
    knl = t_unit.default_entrypoint
    assert knl.name == "rhs"
    args = {a.name: a for a in knl.args}
    assert set(args) == {"x", "y", "rowsum", "sq"}
    assert args["x"].shape == (12, 5)
    assert args["rowsum"].is_output and not args["rowsum"].is_input
    assert args["x"].is_input and not args["x"].is_output
    # the Named, stored temporary under its name
    assert "scaled" in knl.temporary_variables
    assert knl.temporary_variables["scaled"].shape == (12, 5)


def test_single_result_is_named_pt_out_and_data_wrappers_keep_names(queue):
    w = pt.make_data_wrapper(np.arange(5.0), name="weights")
    anon = pt.make_data_wrapper(np.ones(5))
    x = pt.make_placeholder("x", (5,), np.float64)
    prg = pt.generate_loopy(x * w + anon)
    names = {a.name for a in prg.program.default_entrypoint.args}
    assert "_pt_out" in names and "weights" in names and "x" in names
    # the unnamed wrapper gets a generated name, distinct from the others
    assert len(names) == 4
    _evt, (out,) = prg(queue, x=Y)
    np.testing.assert_allclose(out, Y * np.arange(5.0) + 1)


def _split_inner_loops(t_unit):
    """A loop transformation as an array context applies one: every 2-D
    loop nest's inner loop split by 4, the inner part unrolled."""
    knl = t_unit.default_entrypoint
    for insn in knl.instructions:
        inames = sorted(i for i in insn.within_inames if "_dim" in i)
        if len(inames) == 2:
            knl = lp.split_iname(knl, inames[1], 4, inner_tag="unr")
    return t_unit.with_kernel(knl)


def _parallelise_one_loop(t_unit):
    """The one output loop of a one-instruction program over work-groups
    of 4 work-items."""
    (iname,) = [i for i in t_unit.default_entrypoint.all_inames() if "_dim" in i]
    return lp.split_iname(t_unit, iname, 4, outer_tag="g.0", inner_tag="l.0")


def test_user_transformation_changes_the_code_and_keeps_numpys_result(queue):
    prg = pt.generate_loopy(_dag(), function_name="rhs")
    split = prg.with_transformed_program(_split_inner_loops)
    assert "sq_dim1_outer" in split.source
    assert "sq_dim1_outer" not in lp.generate_code_v2(prg.program).device_code()
    _evt, out = split(queue, x=X, y=Y)
    _check(out)
    # a parallelising transformation
    x = pt.make_placeholder("x", (12, 5), np.float64)
    par = pt.generate_loopy(pt.sum(x, axis=1)).with_transformed_program(
        _parallelise_one_loop)
    assert "lid(0)" in par.source
    _evt, (out,) = par(queue, x=X)
    np.testing.assert_allclose(out, X.sum(axis=1))
    # the original program is untouched, and still runs its own plan
    _evt, out = prg(queue, x=X, y=Y)
    _check(out)


def test_semantic_change_is_what_runs(queue):
    x = pt.make_placeholder("x", (7,), np.float64)
    prg = pt.generate_loopy(x + 1)

    def plus_two(t_unit):
        knl = t_unit.default_entrypoint
        (insn,) = knl.instructions
        return t_unit.with_kernel(knl.copy(instructions=[
            insn.copy(expression=insn.expression + 1)]))

    _evt, (out,) = prg.with_transformed_program(plus_two)(queue, x=Y[:5].repeat(2)[:7])
    np.testing.assert_allclose(out, Y[:5].repeat(2)[:7] + 2)


def test_kernel_tag_keeps_the_fast_plan(queue):
    prg = pt.generate_loopy(_dag(), function_name="rhs")
    tagged = prg.with_transformed_program(
        lambda t: t.with_kernel(t.default_entrypoint.tagged(ImplStored())))
    # the code is unchanged: our scheduled kernels run, not loopy's executor
    assert tagged._runner is None
    assert tagged.program.default_entrypoint.tags_of_type(ImplStored)
    _evt, out = tagged(queue, x=X, y=Y)
    _check(out)


def test_symbolic_sizes_are_value_arguments(queue):
    n = pt.make_size_param("n")
    x = pt.make_placeholder("x", (n, 3), np.float64)
    prg = pt.generate_loopy({"y": pt.sum(x, axis=1) * 2, "flat": x.reshape(3 * n)})
    knl = prg.program.default_entrypoint
    assert isinstance(knl.arg_dict["n"], lp.ValueArg)
    par = prg.with_transformed_program(lambda t: lp.split_iname(t, "y_dim0", 2))
    xv = RNG.random((9, 3))
    _evt, out = par(queue, x=xv)
    np.testing.assert_allclose(out["y"], xv.sum(axis=1) * 2)
    np.testing.assert_allclose(out["flat"], xv.reshape(-1))


def test_empty_arrays_give_a_valid_one_entrypoint_unit(queue):
    x = pt.make_placeholder("x", (0, 4), np.float64)
    prg = pt.generate_loopy({"a": 2 * x, "b": pt.sum(x, axis=0)})
    assert len(prg.program.entrypoints) == 1
    changed = prg.with_transformed_program(lambda t: lp.split_iname(t, "b_dim0", 2))
    xv = np.empty((0, 4))
    _evt, out = changed(queue, x=xv)
    assert out["a"].shape == (0, 4)
    np.testing.assert_array_equal(out["b"], np.zeros(4))


def test_force_value_arg_tag_makes_a_value_argument(queue):
    s = pt.make_placeholder("s", (), np.float64).tagged(ForceValueArgTag())
    x = pt.make_placeholder("x", (5,), np.float64)
    prg = pt.generate_loopy(x * s)
    assert isinstance(prg.program.default_entrypoint.arg_dict["s"], lp.ValueArg)
    changed = prg.with_transformed_program(
        lambda t: lp.tag_inames(t, {"_pt_out_dim0": "l.0"}))
    _evt, (out,) = changed(queue, x=Y, s=np.float64(3.0))
    np.testing.assert_allclose(out, 3 * Y)


def test_unit_comes_from_the_code_cache_the_second_time(queue, monkeypatch):
    from pytato_like.target.loopy import cache, unit

    def program():
        x = pt.make_placeholder("x", (5,), np.float64)
        w = pt.make_data_wrapper(np.arange(5.0), name="w")
        v = pt.make_data_wrapper(np.full(5, 3.0))
        return pt.generate_loopy({"a": x * w + v, "b": pt.sum(x * v)},
                                 function_name="cached")

    first = program().program
    cache.clear_memory_cache()  # the disk entry stays: as a new process

    def no_build(*args, **kwargs):
        raise AssertionError("the unit was built again")

    monkeypatch.setattr(unit, "build_translation_unit", no_build)
    prg = program()
    assert prg.program == first
    changed = prg.with_transformed_program(lambda t: lp.split_iname(t, "a_dim0", 2))
    _evt, out = changed(queue, x=Y)
    np.testing.assert_allclose(out["a"], Y * np.arange(5.0) + 3.0)
    np.testing.assert_allclose(out["b"], (Y * 3.0).sum())

# }}}


# {{{ item 3: executables as pytato hands them out

def test_bound_executable_program_has_t_unit_and_entrypoint(queue):
    import pyopencl.array as cla
    prg = pt.generate_loopy(
        _dag(), options=lp.Options(return_dict=True, no_numpy=True),
        function_name="frozen_rhs").bind_to_context(queue.context)
    assert prg.program.entrypoint == "frozen_rhs"
    assert isinstance(prg.program.t_unit, lp.TranslationUnit)
    transformed = prg.with_transformed_translation_unit(_split_inner_loops)
    assert transformed.program.entrypoint == "frozen_rhs"
    args = {"x": cla.to_device(queue, X), "y": cla.to_device(queue, Y)}
    for exe in (prg, transformed):
        # the queue as keyword, as arraycontext calls it
        _evt, out = exe(queue=queue, **args)
        assert isinstance(out["sq"], cla.Array)
        _check(out, queue)


def test_queue_keyword_on_every_program_kind(queue):
    x = pt.make_placeholder("x", (5,), np.float64)
    twice = pt.trace_call(lambda a: 2 * a, x)
    for prg in (pt.generate_loopy(x + 1), pt.generate_loopy(twice + 1)):
        _evt, (out,) = prg(queue=queue, x=Y)
        np.testing.assert_allclose(out, 2 * Y + 1 if prg.__class__.__name__
                                   == "OutlinedProgram" else Y + 1)
        exe = prg.bind_to_context(queue.context)
        _evt, (out,) = exe(queue=queue, x=Y, out_host=True)
        np.testing.assert_allclose(out, 2 * Y + 1 if prg.__class__.__name__
                                   == "OutlinedProgram" else Y + 1)
    with pytest.raises(pt.diagnostic.QueueError, match="no command queue"):
        pt.generate_loopy(x + 1)(x=Y)
    import pyopencl as cl
    other = cl.CommandQueue(cl.Context(queue.context.devices))
    exe = pt.generate_loopy(x + 1).bind_to_context(queue.context)
    with pytest.raises(pt.diagnostic.QueueError, match="is not the one"):
        exe(other, x=Y)


def test_outlined_program_unit_is_the_inlined_dag(queue):
    x = pt.make_placeholder("x", (8,), np.float64)
    y = pt.trace_call(lambda a: a * a, x) + pt.trace_call(lambda a: a * a, x + 1)
    prg = pt.generate_loopy(y, function_name="calls")
    assert set(prg.program.entrypoints) == {"calls"}
    xv = np.arange(8.0)
    par = prg.with_transformed_program(lambda t: lp.tag_inames(
        t, {"_pt_out_dim0": "l.0"}))
    _evt, (out,) = par(queue, x=xv)
    np.testing.assert_allclose(out, xv * xv + (xv + 1) ** 2)


@tag_dataclass
class ElementAxis(Tag):
    """Like meshmode's tag of element axes."""


@tag_dataclass
class DOFAxis(Tag):
    """Like meshmode's tag of DOF axes."""


@tag_dataclass
class IsDOFArray(Tag):
    """Like meshmode's tag of DOF arrays."""


def test_array_and_axis_tags_reach_variables_and_inames():
    x = pt.make_placeholder("x", (10, 4), np.float64,
                            tags=frozenset([IsDOFArray()]))
    y = ((2 * x).with_tagged_axis(0, [ElementAxis()])
         .with_tagged_axis(1, [DOFAxis()])
         .tagged((IsDOFArray(), Named("ignored"))))
    knl = pt.generate_loopy({"y": y}).program.default_entrypoint
    # what meshmode's transformations look for: axis tags on the inames
    assert knl.inames["y_dim0"].tags == frozenset([ElementAxis()])
    assert knl.inames["y_dim1"].tags == frozenset([DOFAxis()])
    # array tags on the variables, but not Named (pytato's default filter)
    assert knl.arg_dict["x"].tags == frozenset([IsDOFArray()])
    assert knl.arg_dict["y"].tags == frozenset([IsDOFArray()])
    filtered = pt.generate_loopy(
        {"y": y}, axis_tag_t_to_not_propagate=frozenset([DOFAxis]),
        array_tag_t_to_not_propagate=frozenset([IsDOFArray, Named])
    ).program.default_entrypoint
    assert filtered.inames["y_dim1"].tags == frozenset()
    assert filtered.inames["y_dim0"].tags == frozenset([ElementAxis()])
    assert filtered.arg_dict["y"].tags == frozenset()


def test_sparse_products_are_in_the_unit(queue):
    sps = pytest.importorskip("scipy.sparse")
    a = sps.random(20, 30, density=0.2, format="csr", random_state=3)
    vals = pt.make_placeholder("vals", a.data.shape, np.float64)
    mat = pt.make_csr_matrix(
        (20, 30), vals + 1, pt.make_data_wrapper(a.indices.astype(np.int32)),
        pt.make_data_wrapper(a.indptr.astype(np.int32)))
    x = pt.make_placeholder("x", (30,), np.float64)
    prg = pt.generate_loopy({"y": mat @ (2 * x) - 1, "z": mat @ x},
                            function_name="spmv")
    assert set(prg.program.entrypoints) == {"spmv"}
    assert {"x", "vals", "y", "z"} <= set(prg.program.default_entrypoint.arg_dict)
    xv = RNG.random(30)
    b = sps.csr_matrix((a.data + 1, a.indices, a.indptr), shape=(20, 30))
    split = prg.with_transformed_program(lambda t: lp.split_iname(t, "y_dim0", 4))
    _evt, out = split(queue, x=xv, vals=a.data)
    np.testing.assert_allclose(out["y"], b @ (2 * xv) - 1)
    np.testing.assert_allclose(out["z"], b @ xv)
    # unchanged: the program's own runners; bound to a context, as
    # arraycontext's freeze() uses it
    exe = prg.bind_to_context(queue.context).with_transformed_translation_unit(
        lambda t: t)
    _evt, out = exe(queue=queue, x=xv, vals=a.data)
    np.testing.assert_allclose(out["y"].get(), b @ (2 * xv) - 1)

# }}}


# {{{ item 9: unchanged code that imports pytato

PYTATO_PROGRAM = textwrap.dedent("""
    import numpy as np
    import pytato as pt
    import pytato.array
    from pytato.transform import CopyMapper
    import pytato_like
    assert pt is pytato_like and pytato.array is pytato_like.array
    x = pt.make_placeholder("x", (4,), np.float64)
    assert isinstance(x, pytato_like.array.Placeholder)
    out = pt.generate_numpy(CopyMapper()(2 * x))(x=np.arange(4.0))
    print(sorted(out.tolist() if hasattr(out, "tolist") else out[1][0].tolist()))
""")


def test_run_module_makes_import_pytato_load_pytato_like(tmp_path):
    script = tmp_path / "uses_pytato.py"
    script.write_text(PYTATO_PROGRAM)
    res = subprocess.run([sys.executable, "-m", "pytato_like.run", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "[0.0, 2.0, 4.0, 6.0]"
    # without the alias there is no pytato here
    res = subprocess.run([sys.executable, str(script)], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode != 0 and "No module named 'pytato'" in res.stderr


def test_alias_refuses_when_the_real_pytato_was_imported(tmp_path):
    fake = tmp_path / "pytato"
    fake.mkdir()
    (fake / "__init__.py").write_text("REAL = True\n")
    code = textwrap.dedent("""
        import pytato
        from pytato_like.compat import install_pytato_alias
        from pytato_like.diagnostic import ConfigurationError
        try:
            install_pytato_alias()
        except ConfigurationError as e:
            print("refused:", e)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=120,
                         env={**__import__("os").environ,
                              "PYTHONPATH": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    assert "refused:" in res.stdout and "real pytato" in res.stdout


@pytest.mark.mpi
def test_alias_under_mpiexec(tmp_path):
    mpiexec = mpiexec_path()
    script = tmp_path / "ranks.py"
    script.write_text(textwrap.dedent("""
        from mpi4py import MPI
        import pytato as pt
        import pytato_like
        assert pt is pytato_like
        ranks = MPI.COMM_WORLD.gather(MPI.COMM_WORLD.rank)
        if ranks is not None:
            print("ranks ok:", sorted(ranks), flush=True)
    """))
    res = subprocess.run([mpiexec, "-n", "3", sys.executable, "-m",
                          "pytato_like.run", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "ranks ok: [0, 1, 2]" in res.stdout

# }}}


# {{{ deep DAGs

def test_unit_of_a_100000_deep_dag_at_the_default_recursion_limit():
    # transposes keep each stored array's expression small, so the unit's
    # size is set by how often the cost model stores (~1 in 40 here)
    x = pt.make_placeholder("x", (4, 4), np.float64)
    y = x
    for _ in range(100_000):
        y = y.T
    knl = pt.generate_loopy(y * 2).program.default_entrypoint
    assert sys.getrecursionlimit() == 1000
    writes = {i.id: i for i in knl.instructions}
    (last,) = [i for i in knl.instructions if i.assignee_var_names() == ("_pt_out",)]
    # the chain of stores is unbroken: each depends on the one before it
    depth, insn = 1, last
    while insn.depends_on:
        (dep,) = insn.depends_on
        insn, depth = writes[dep], depth + 1
    assert depth == len(knl.instructions) > 100


def test_transformed_unit_of_a_deep_chain_matches_numpy(queue):
    x = pt.make_placeholder("x", (6,), np.float64)
    y = x
    for _ in range(300):
        y = 0.5 * y + 1.0
    prg = pt.generate_loopy(y)
    changed = prg.with_transformed_program(
        lambda t: lp.tag_inames(t, {i: "l.0" for i in
                                    t.default_entrypoint.all_inames()}))
    assert changed._runner is not None
    xv = RNG.random(6)
    ref = xv.copy()
    for _ in range(300):
        ref = 0.5 * ref + 1.0
    _evt, (out,) = changed(queue, x=xv)
    np.testing.assert_allclose(out, ref, rtol=1e-13)

# }}}
