"""Outlined function calls (``pt.trace_call``), written as a pytato user
writes them, checked against NumPy evaluating the same Python functions."""

from __future__ import annotations

import functools
import pickle
import shutil
import subprocess

import numpy as np
import pytest

import pytato_like as pt
from pytato_like import opencl_build
from pytato_like import diagnostic
from pytato_like.function import (
    Call,
    FunctionDefinition,
    NamedCallResult,
    ReturnType,
    trace_call,
)
from pytato_like.tags import FunctionIdentifier, InlineCallTag
from pytato_like.transform.calls import inline_calls, tag_all_calls_to_be_inlined

# {{{ functions written once for both NumPy and pytato_like (xp = np or pt)


def flux(u, v, *, xp):
    return 0.5 * (u + v) - 0.25 * xp.sin(u - v), u * v


def energy(u, *, xp):
    first, second = trace_call(functools.partial(flux, xp=xp), u, u) \
        if xp is pt else flux(u, u, xp=xp)
    return {"e": first * first + second, "m": xp.sum(u)}


def smooth(u, *, xp):
    return 0.5 * u + 0.25 * (xp.roll(u, 1) + xp.roll(u, -1))

# }}}


def _nodes_of(expr):
    from pytato_like._traversal import topological_order
    roots = (list(expr._data.values()) if isinstance(expr, pt.DictOfNamedArrays)
             else [expr])
    return topological_order(roots)


def _node_counts(expr):
    counts = pt.analysis.get_node_type_counts(expr)
    return {cls.__name__: n for cls, n in counts.items()}


@pytest.fixture
def uv():
    rng = np.random.default_rng(7)
    return rng.standard_normal(16), rng.standard_normal(16)


# {{{ tracing


def test_results_keep_the_structure_the_function_returned(uv):
    u = pt.make_placeholder("u", (16,), np.float64)
    v = pt.make_placeholder("v", (16,), np.float64)
    a, b = trace_call(functools.partial(flux, xp=pt), u, v)
    assert isinstance(a, NamedCallResult) and isinstance(b, NamedCallResult)
    assert a.call is b.call and a.name == "_0" and b.name == "_1"
    call = a.call
    assert isinstance(call, Call) and set(call) == {"_0", "_1"}
    assert call.function.return_type is ReturnType.TUPLE_OF_ARRAYS
    assert call.function.parameters == {"in__pt_0", "in__pt_1"}
    assert FunctionIdentifier("flux") not in call.function.tags  # a partial
    assert call.function.identifier is None

    single = trace_call(lambda x: 2 * x, u, identifier="double")
    assert single.call.function.return_type is ReturnType.ARRAY
    assert single.name == "_"
    assert FunctionIdentifier("double") in single.call.function.tags

    d = trace_call(functools.partial(energy, xp=pt), u)
    assert set(d) == {"e", "m"} and d["m"].shape == ()

    def named(x, *, scale):
        return x * scale
    kw = trace_call(named, u, scale=v)
    assert kw.call.function.parameters == {"in__pt_0", "in_scale"}
    assert kw.call.function.identifier == "named"
    assert kw.call.bindings["in_scale"] is v


def test_calls_evaluate_like_the_python_function_on_numpy(uv):
    un, vn = uv
    u = pt.make_placeholder("u", (16,), np.float64)
    v = pt.make_placeholder("v", (16,), np.float64)
    a, b = trace_call(functools.partial(flux, xp=pt), u, v)
    d = trace_call(functools.partial(energy, xp=pt), a - b)
    out = pt.make_dict_of_named_arrays({"a": a, "e": d["e"], "m": d["m"]})

    ra, rb = flux(un, vn, xp=np)
    rd = energy(ra - rb, xp=np)
    got = pt.generate_numpy(out)(u=un, v=vn)
    np.testing.assert_allclose(got["a"], ra, rtol=1e-13)
    np.testing.assert_allclose(got["e"], rd["e"], rtol=1e-13)
    np.testing.assert_allclose(got["m"], rd["m"], rtol=1e-12)


def test_bad_calls_raise_typed_errors():
    u = pt.make_placeholder("u", (4,), np.float64)
    y = trace_call(lambda x: x + 1, u, identifier="inc")
    definition = y.call.function
    with pytest.raises(diagnostic.InputShapeMismatchError, match="shape"):
        definition(in__pt_0=pt.make_placeholder("w", (5,), np.float64))
    with pytest.raises(diagnostic.InputDTypeMismatchError, match="int64"):
        definition(in__pt_0=pt.make_placeholder("w", (4,), np.int64))
    with pytest.raises(diagnostic.MissingInputError, match="in__pt_0"):
        definition()
    with pytest.raises(diagnostic.UnexpectedInputError, match="extra"):
        definition(in__pt_0=u, extra=u)
    with pytest.raises(diagnostic.InvalidNameError, match="_pt_0"):
        trace_call(lambda x, **kw: x, u, _pt_0=u)
    with pytest.raises(diagnostic.NotAnArrayError, match="returned a int"):
        trace_call(lambda x: 3, u)
    with pytest.raises(diagnostic.NotAnArrayError, match="argument 'in__pt_0'"):
        trace_call(lambda x: x, np.ones(4))
    # a body may only read its parameters
    with pytest.raises(diagnostic.InvalidNameError, match="'u'"):
        FunctionDefinition(frozenset(), ReturnType.ARRAY, {"_": u + 1})
    with pytest.raises(KeyError):
        y.call["nope"]


def test_equal_traces_are_equal_and_pickle(uv):
    un, vn = uv
    u = pt.make_placeholder("u", (16,), np.float64)
    v = pt.make_placeholder("v", (16,), np.float64)
    f = functools.partial(flux, xp=pt)
    a1, _ = trace_call(f, u, v)
    a2, _ = trace_call(f, u, v)
    assert a1 is not a2 and a1 == a2 and hash(a1) == hash(a2)
    assert a1.call.function == a2.call.function
    a3, _ = trace_call(f, v, u)           # other arguments
    assert a3 != a1 and a3.call.function == a1.call.function
    other = trace_call(lambda x, y: (x - y, x), u, v, identifier="flux")
    assert other[0] != a1

    out = a1 + trace_call(functools.partial(smooth, xp=pt), a1)
    back = pickle.loads(pickle.dumps(out))
    assert back == out
    ref = pt.generate_numpy(out)(u=un, v=vn)
    np.testing.assert_allclose(pt.generate_numpy(back)(u=un, v=vn), ref)

# }}}


# {{{ inlining


def test_inline_calls_only_inlines_tagged_calls(uv):
    un, vn = uv
    u = pt.make_placeholder("u", (16,), np.float64)
    v = pt.make_placeholder("v", (16,), np.float64)
    a, b = trace_call(functools.partial(flux, xp=pt), u, v)
    d = trace_call(functools.partial(energy, xp=pt), a * b)
    out = pt.make_dict_of_named_arrays({"e": d["e"], "m": d["m"]})
    ref = pt.generate_numpy(out)(u=un, v=vn)

    assert inline_calls(out) == out       # nothing tagged: unchanged
    tagged = tag_all_calls_to_be_inlined(out)
    calls = [n for n in _nodes_of(tagged) if isinstance(n, Call)]
    assert calls and all(c.tags_of_type(InlineCallTag) for c in calls)
    # the call inside energy's body is tagged too
    inner = calls[-1].function.returns["e"]
    inner_calls = [n for n in _nodes_of(inner) if isinstance(n, Call)]
    assert inner_calls and all(c.tags_of_type(InlineCallTag)
                               for c in inner_calls)

    inlined = inline_calls(tagged)
    counts = _node_counts(inlined)
    assert "Call" not in counts and "NamedCallResult" not in counts
    got = pt.generate_numpy(inlined)(u=un, v=vn)
    for name in ("e", "m"):
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-13)

    # the same on the function definition itself
    fdef = calls[-1].function
    flat = inline_calls(tag_all_calls_to_be_inlined(fdef))
    assert isinstance(flat, FunctionDefinition)
    assert "Call" not in _node_counts(pt.make_dict_of_named_arrays(
        dict(flat.returns)))


def test_inlining_keeps_callers_placeholders_of_the_same_name():
    # the body's parameter and a caller's input share the name "in__pt_0"
    x = pt.make_placeholder("in__pt_0", (3,), np.float64)
    y = pt.make_placeholder("y", (3,), np.float64)
    r = trace_call(lambda a: a * 10, y + x)
    inlined = inline_calls(tag_all_calls_to_be_inlined(r))
    xv, yv = np.arange(3.0), np.ones(3)
    np.testing.assert_allclose(pt.generate_numpy(inlined)(in__pt_0=xv, y=yv),
                               (yv + xv) * 10)

# }}}


# {{{ mappers


def test_pytato_style_mapper_methods_see_calls(uv):
    u = pt.make_placeholder("u", (16,), np.float64)
    v = pt.make_placeholder("v", (16,), np.float64)
    a, b = trace_call(functools.partial(flux, xp=pt), u, v)
    out = a * b

    class ScaleInputs(pt.transform.CopyMapper):
        """Doubles every placeholder of the caller and of the bodies."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.definitions_mapped = 0

        def map_placeholder(self, expr):
            return 2 * expr

        def map_function_definition(self, expr):
            self.definitions_mapped += 1
            return super().map_function_definition(expr)

    mapper = ScaleInputs()
    scaled = mapper(out)
    assert mapper.definitions_mapped == 1
    un, vn = uv
    ra, rb = flux(4 * un, 4 * vn, xp=np)   # doubled outside and inside
    np.testing.assert_allclose(pt.generate_numpy(scaled)(u=un, v=vn), ra * rb,
                               rtol=1e-13)

    class CountCalls(pt.transform.CachedWalkMapper):
        def __init__(self):
            super().__init__()
            self.calls = 0
            self.results = 0

        def post_visit(self, expr):
            if isinstance(expr, Call):
                self.calls += 1
            elif isinstance(expr, NamedCallResult):
                self.results += 1

    counter = CountCalls()
    counter(out)
    assert (counter.calls, counter.results) == (1, 2)

    deps = pt.transform.DependencyMapper()(out)
    assert a.call in deps and u in deps and v in deps
    assert pt.transform.CopyMapper()(out) is out


def test_dead_code_and_deduplication_reach_bodies(uv):
    u = pt.make_placeholder("u", (16,), np.float64)
    y = trace_call(lambda x: pt.sin(x) + pt.sin(x), u)
    before = y.call.function.returns["_"]
    deduped = pt.transform.deduplicate(y)
    after = deduped.call.function.returns["_"]
    assert after == before
    assert len(_nodes_of(after)) < len(_nodes_of(before))  # sin(x) once
    un, _ = uv
    np.testing.assert_allclose(pt.generate_numpy(deduped)(u=un), 2 * np.sin(un))
    assert pt.eliminate_dead_code(y) == y

# }}}


# {{{ the loopy target


def test_loopy_target_matches_numpy_target(queue, uv):
    import pyopencl.array as cla
    un, vn = uv
    u = pt.make_placeholder("u", (16,), np.float64)
    v = pt.make_placeholder("v", (16,), np.float64)
    a, b = trace_call(functools.partial(flux, xp=pt), u, v)
    d = trace_call(functools.partial(energy, xp=pt), a - b)
    out = pt.make_dict_of_named_arrays({"a": a, "e": d["e"], "m": d["m"],
                                        "s": d["e"] + 1})
    ref = pt.generate_numpy(out)(u=un, v=vn)
    prg = pt.generate_loopy(out)
    _, got = prg(queue, u=un, v=vn)
    for name in ref:
        assert isinstance(got[name], np.ndarray)       # host in, host out
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-12)
    # device in, device out (loopy's out_host rule)
    _, got = prg(queue, u=cla.to_device(queue, un), v=cla.to_device(queue, vn))
    assert isinstance(got["e"], cla.Array)
    np.testing.assert_allclose(got["e"].get(), ref["e"], rtol=1e-12)
    # an array result gives a 1-tuple
    _, (single,) = pt.generate_loopy(a * 2)(queue, u=un, v=vn)
    np.testing.assert_allclose(single, 2 * flux(un, vn, xp=np)[0], rtol=1e-13)


def test_thousand_calls_compile_the_definition_once(queue):
    u = pt.make_placeholder("u", (32,), np.float64)
    step = functools.partial(smooth, xp=pt)
    y = u
    for _ in range(1000):
        y = trace_call(step, y)
    from pytato_like.target.loopy import cache
    cache.clear_memory_cache()          # count this DAG's OpenCL builds only
    builds = opencl_build.OPENCL_BUILDS
    prg = pt.generate_loopy(y)
    assert len(prg.definition_programs) == 1
    # no caller-side kernels: every argument is an input or a call result
    assert all(stage.program is None for stage in prg.stages)
    un = np.random.default_rng(3).standard_normal(32)
    _, (got,) = prg(queue, u=un)
    # the definition's kernels are built in one OpenCL build, not per call
    assert opencl_build.OPENCL_BUILDS == builds + 1
    _, (again,) = prg(queue, u=un)
    assert opencl_build.OPENCL_BUILDS == builds + 1
    np.testing.assert_array_equal(again, got)
    ref = un
    for _ in range(1000):
        ref = smooth(ref, xp=np)
    np.testing.assert_allclose(got, ref, rtol=1e-12)

# }}}


# {{{ visualisation and partitioning


def test_dot_graph_draws_each_definition_once_as_a_cluster():
    u = pt.make_placeholder("u", (8,), np.float64)
    f = functools.partial(smooth, xp=pt)
    y = trace_call(f, trace_call(f, u)) + trace_call(
        lambda x: trace_call(f, x) * 3, u, identifier="outer")
    src = pt.get_dot_graph(y)
    assert src.count("subgraph cluster_") == 2      # smooth's and outer's
    assert 'label="function outer"' in src
    assert src.count('label="calls"') == 4          # three calls + one inside
    if shutil.which("dot"):
        proc = subprocess.run(["dot", "-Tsvg"], input=src, text=True,
                              capture_output=True, check=False)
        assert proc.returncode == 0, proc.stderr
        assert "<svg" in proc.stdout


@pytest.mark.parametrize("target", ["numpy", "loopy"])
def test_partitioned_dag_with_calls_runs(target, request):
    # the loopy part program keeps the calls outlined (no inlining first)
    queue = request.getfixturevalue("queue") if target == "loopy" else None
    from pytato_like.distributed import (
        execute_distributed_partition,
        find_distributed_partition,
        generate_code_for_partition,
        number_distributed_tags,
    )
    u = pt.make_placeholder("u", (8,), np.float64)
    f = functools.partial(flux, xp=pt)
    a, b = trace_call(f, u, 2 * u)
    outputs = pt.make_dict_of_named_arrays({"a": a, "c": trace_call(f, a, b)[1]})
    parts = find_distributed_partition(None, outputs)
    parts, _ = number_distributed_tags(None, parts, 0)
    prgs = generate_code_for_partition(parts, target=target)
    un = np.linspace(0, 1, 8)
    got = execute_distributed_partition(parts, prgs, queue, None,
                                        input_args={"u": un})
    if target == "loopy":
        # (lazy part programs: generated by the execution, then they are
        # the programs made)
        from pytato_like.target.loopy.outlined import OutlinedProgram
        assert any(isinstance(p, OutlinedProgram) for p in prgs.values())
    got = {k: v.get() if hasattr(v, "get") else v for k, v in got.items()}
    ra, rb = flux(un, 2 * un, xp=np)
    np.testing.assert_allclose(got["a"], ra, rtol=1e-13)
    np.testing.assert_allclose(got["c"], flux(ra, rb, xp=np)[1], rtol=1e-13)

# }}}


# {{{ deep DAGs (default recursion limit)


def test_deep_chain_through_a_call_and_a_deep_body(deep_chain):
    x, y = deep_chain                         # 100 000 updates of x
    r = trace_call(lambda a: a * 2, y)        # a deep argument
    # a body 100 000 updates deep
    deep = trace_call(lambda a: _chain(a, 100_000), x)
    out = pt.make_dict_of_named_arrays({"r": r, "d": deep})
    xv = np.array([0.0, 1.0, 2.0])
    ref = _chain_np(xv, 100_000)
    got = pt.generate_numpy(out)(x=xv)
    np.testing.assert_allclose(got["r"], 2 * ref)
    np.testing.assert_allclose(got["d"], ref)
    assert pickle.loads(pickle.dumps(out)) == out
    inlined = inline_calls(tag_all_calls_to_be_inlined(out))
    np.testing.assert_allclose(pt.generate_numpy(inlined)(x=xv)["d"], ref)
    assert pt.transform.CopyMapper()(out) is out


def test_chain_of_fifty_thousand_calls():
    # 50 000 calls in a row: depth 100 001 in the caller's DAG
    x = pt.make_placeholder("x", (3,), np.float64)
    y = x
    for _ in range(50_000):
        y = trace_call(_half_plus_one, y)
    xv = np.array([0.0, 1.0, 2.0])
    ref = _chain_np(xv, 50_000)
    np.testing.assert_allclose(pt.generate_numpy(y)(x=xv), ref)
    back = pickle.loads(pickle.dumps(y))
    assert back == y
    inlined = inline_calls(tag_all_calls_to_be_inlined(y))
    assert _node_counts(inlined).get("Call") is None
    np.testing.assert_allclose(pt.generate_numpy(inlined)(x=xv), ref)
    assert pt.analysis.get_num_nodes(y) == 100_001


def _half_plus_one(a):
    return 0.5 * a + 1.0


def _chain(a, n):
    for _ in range(n):
        a = 0.5 * a + 1.0
    return a


def _chain_np(a, n):
    for _ in range(n):
        a = 0.5 * a + 1.0
    return a

# }}}

# vim: foldmethod=marker


# {{{ concatenating calls


def _rowwise_flux(u, v):
    return 0.5 * (u + v) - 0.25 * pt.sin(u - v), u * v


def test_concatenate_calls_merges_independent_calls(queue):
    from pytato_like.transform.calls import CallSiteLocation, concatenate_calls
    rng = np.random.default_rng(12)
    sizes = (4, 5, 6)
    us = [pt.make_placeholder(f"u{i}", (n, 3), np.float64)
          for i, n in enumerate(sizes)]
    vs = [pt.make_placeholder(f"v{i}", (n, 3), np.float64)
          for i, n in enumerate(sizes)]
    results = [trace_call(_rowwise_flux, u, v) for u, v in zip(us, vs, strict=True)]
    out = pt.make_dict_of_named_arrays(
        {f"a{i}": r[0] + r[1] for i, r in enumerate(results)})
    seen = []

    def take_all(site):
        assert isinstance(site, CallSiteLocation) and site.stack == ()
        seen.append(site.call)
        return True

    merged = concatenate_calls(out, take_all)
    assert len(seen) == 3
    calls = [n for n in _nodes_of(merged) if isinstance(n, Call)]
    assert len(calls) == 1
    assert calls[0].bindings["in__pt_0"].shape == (15, 3)
    inputs = {f"u{i}": rng.standard_normal((n, 3)) for i, n in enumerate(sizes)}
    inputs.update({f"v{i}": rng.standard_normal((n, 3))
                   for i, n in enumerate(sizes)})
    ref = {}
    for i in range(3):
        a, b = _rowwise_flux_np(inputs[f"u{i}"], inputs[f"v{i}"])
        ref[f"a{i}"] = a + b
    by_numpy = pt.generate_numpy(merged)(**inputs)
    _, by_loopy = pt.generate_loopy(merged)(queue, **inputs)
    for name, value in ref.items():
        np.testing.assert_allclose(by_numpy[name], value, rtol=1e-13)
        np.testing.assert_allclose(by_loopy[name], value, rtol=1e-13)

    # only the selected calls merge
    two = concatenate_calls(out, lambda site: site.call is not results[0][0].call)
    assert len([n for n in _nodes_of(two) if isinstance(n, Call)]) == 2
    got = pt.generate_numpy(two)(**inputs)
    for name, value in ref.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-13)


def _rowwise_flux_np(u, v):
    return 0.5 * (u + v) - 0.25 * np.sin(u - v), u * v


def test_concatenate_calls_refuses_what_it_cannot_merge():
    from pytato_like.transform.calls import concatenate_calls
    u = pt.make_placeholder("u", (4, 3), np.float64)
    w = pt.make_placeholder("w", (5, 3), np.float64)
    # a body mixing rows (a roll along the first axis)
    rolled = [trace_call(lambda a: pt.roll(a, 1, axis=0), x) for x in (u, w)]
    with pytest.raises(diagnostic.UnsupportedArrayError, match="elementwise"):
        concatenate_calls(rolled[0] + 1, lambda site: True)
    # one call reading another's result
    first = trace_call(lambda a: 2 * a, u)
    second = trace_call(lambda a: 2 * a, first)
    with pytest.raises(diagnostic.UnsupportedArrayError, match="depends"):
        concatenate_calls(second, lambda site: True)
    # two different functions
    mixed = pt.make_dict_of_named_arrays({
        "a": trace_call(lambda a: 2 * a, u), "b": trace_call(lambda a: 3 * a, w)})
    with pytest.raises(diagnostic.UnsupportedArrayError, match="different"):
        concatenate_calls(mixed, lambda site: True)
    # nothing selected
    with pytest.warns(UserWarning, match="no call"):
        assert concatenate_calls(mixed, lambda site: False) is mixed
    with pytest.raises(ValueError, match="no call"):
        concatenate_calls(mixed, lambda site: False, err_if_no_calls=True)

# }}}


# {{{ every remaining mapper family on a deep chain through calls


def test_deep_chain_through_calls_in_every_mapper_family(deep_chain):
    from pytato_like.stringifier import stringify_dag
    from pytato_like.transform import DependencyMapper
    from pytato_like.transform.deduplicate import deduplicate
    from pytato_like.transform.users import UsersCollector

    x, y = deep_chain                         # 100 000 updates of x
    r = trace_call(lambda a: a * 2, y)        # a deep argument
    out = pt.make_dict_of_named_arrays({"r": r})
    # built twice independently: equal, same hash, distinct objects
    r2 = trace_call(lambda a: a * 2, _chain(x, 100_000))
    assert r2 is not r
    assert r2 == r and hash(r2) == hash(r)
    assert isinstance(r, NamedCallResult)
    assert any(b is y for b in r.call.bindings.values())

    text = stringify_dag(out)
    assert "Call" in text
    deps = DependencyMapper()(out)
    assert r in deps and x in deps
    users = UsersCollector()
    users(out)
    assert any(u is r.call for u in users.node_to_users[y])
    xv = np.array([0.0, 1.0, 2.0])
    ref = 2 * _chain_np(xv, 100_000)
    for rewritten in (pt.eliminate_dead_code(out), deduplicate(out)):
        assert rewritten == out
        np.testing.assert_allclose(pt.generate_numpy(rewritten)(x=xv)["r"], ref)

# }}}


def test_dot_graph_of_a_deep_chain_through_a_call(deep_chain):
    x, y = deep_chain                         # 100 000 updates of x
    r = trace_call(lambda a: pt.sin(a) * 2, y)
    src = pt.get_dot_graph(r)
    # the caller's chain is drawn node by node, the definition once
    assert src.count("subgraph cluster") == 1
    assert src.count("calls") >= 1
    assert src.count("->") >= 100_000
