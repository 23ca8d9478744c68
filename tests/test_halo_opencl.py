"""The loopy-generated OpenCL halo packer (pytato_like.runtime.halo_opencl)
against the NumPy packer, over layouts that exercise every path of the
copy planning (merged axes, more than three axes, elements copied as
several words, negated complex components), and the promise that its
kernels come from one OpenCL build, shared with the part programs."""

from __future__ import annotations

import numpy as np
import pytest

import pytato_like as pt
from pytato_like.runtime.halo import (
    HaloDataTransformer,
    HaloExchangeSpec,
    QuantityHaloSpec,
)

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")


def _random(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape)
                + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(-100 if dtype.kind == "i" else 0, 100,
                            shape).astype(dtype)
    if dtype.kind == "V":
        return rng.integers(0, 256, (*shape, dtype.itemsize), np.uint8
                            ).view(dtype).reshape(shape)
    return rng.standard_normal(shape).astype(dtype)


def _layouts():
    """(name, dims, shape, pack slices, turns) of one quantity each."""
    return [
        ("whole 1-d", None, (37,), (slice(None),), 0),
        ("2-d edge, strided", None, (9, 11), (slice(1, 8, 3), slice(0, 2)), 1),
        ("3-d column", None, (6, 7, 5), (slice(0, 2), slice(2, 6), slice(None)),
         2),
        ("3-d y before x", ("z", "y", "x"), (4, 7, 6),
         (slice(None), slice(1, -1), slice(-2, None)), 3),
        ("5-d strided", ("x", "y", "z", "d3", "d4"), (3, 4, 3, 3, 5),
         (slice(0, 3, 2), slice(1, 4), slice(None), slice(0, 3, 2),
          slice(1, 5, 2)), 1),
        ("single element", None, (4, 4), (slice(2, 3), slice(1, 2)), 0),
    ]


def _specs(layout, dtype):
    _, dims, shape, pack, turns = layout
    q = QuantityHaloSpec(shape, dtype, dims)
    packed = HaloExchangeSpec(q, pack, turns, pack).packed_shape
    unpack = tuple(slice(0, n) for n in packed)
    return HaloExchangeSpec(q, pack, turns, unpack)


DTYPES = [np.float64, np.float32, np.int16, np.uint8, np.bool_, np.complex64,
          np.complex128, np.dtype("V12")]


# turned vectors negate a component: only signed dtypes
CASES = [(dtype, False) for dtype in DTYPES] + [
    (dtype, True) for dtype in DTYPES if np.dtype(dtype).kind in "fic"]


@pytest.mark.parametrize(("dtype", "vector"), CASES, ids=str)
def test_opencl_pack_and_unpack_equal_numpy(queue, rng, dtype, vector):
    dtype = np.dtype(dtype)
    specs = [_specs(lay, dtype) for lay in _layouts()]
    xs = [_random(rng, s.specification.shape, dtype) for s in specs]
    ys = [_random(rng, s.specification.shape, dtype) for s in specs]
    args = (specs, specs) if vector else (specs,)
    tn = HaloDataTransformer.get(np, *args)
    tc = HaloDataTransformer.get(queue, *args)
    host = (xs, ys) if vector else (xs,)
    tn.async_pack(*[[a.copy() for a in group] for group in host])
    tc.async_pack(*[[cla.to_device(queue, a) for a in group]
                    for group in host])
    expected = tn.get_pack_buffer()
    got = tc.get_pack_buffer().get()
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.view(np.uint8), expected.view(np.uint8))

    # unpack the same (arbitrary) bytes on both sides
    received = _random(rng, expected.shape, expected.dtype)
    tn.get_unpack_buffer()[...] = received
    tc.get_unpack_buffer().set(np.ascontiguousarray(received))
    host_out = [[_random(rng, s.specification.shape, dtype) for s in specs]
                for _ in host]
    dev_out = [[cla.to_device(queue, a) for a in group] for group in host_out]
    tn.async_unpack(*host_out)
    tc.async_unpack(*dev_out)
    tc.synchronize()
    for hg, dg in zip(host_out, dev_out, strict=True):
        for h, d in zip(hg, dg, strict=True):
            np.testing.assert_array_equal(d.get().view(np.uint8),
                                          h.view(np.uint8))


def test_kernels_do_not_depend_on_sizes(queue):
    small = HaloDataTransformer.get(queue, [_specs(_layouts()[1], np.float64)])
    big = HaloDataTransformer.get(queue, [HaloExchangeSpec.whole_array(
        (300, 17), np.float64)])
    assert small.kernel_sources == big.kernel_sources


def test_vector_of_an_unsigned_dtype_cannot_turn(queue):
    from pytato_like.diagnostic import HaloSpecError
    spec = _specs(_layouts()[1], np.uint16)
    with pytest.raises(HaloSpecError, match="uint16"):
        HaloDataTransformer.get(queue, [spec], [spec])


@pytest.fixture
def fresh_context(tmp_path, monkeypatch):
    """A new context (nothing built for it yet), private caches, and a
    counter of the OpenCL program builds for that context (every
    ``pyopencl.Program.build`` but those of other contexts, such as the
    PoCL warm-up's of :mod:`pytato_like.target.loopy.pocl_warmup`)."""
    from pytato_like.target.loopy import cache
    monkeypatch.setenv("PYTATO_LIKE_CACHE_DIR", str(tmp_path))
    cache.clear_memory_cache()
    builds = []
    real_build = cl.Program.build
    ctx = cl.create_some_context(interactive=False)

    def counting_build(self, *args, **kwargs):
        if self._context == ctx:  # (get_info would build it uncached)
            builds.append(self)
        return real_build(self, *args, **kwargs)

    monkeypatch.setattr(cl.Program, "build", counting_build)
    return cl.CommandQueue(ctx), builds


def test_packing_kernels_of_many_exchanges_come_from_one_build(
        fresh_context, rng):
    queue, builds = fresh_context
    transformers, arrays = [], []
    for dtype in (np.float64, np.complex64, np.int8):
        for layout in _layouts():
            spec = _specs(layout, dtype)
            transformers.append(HaloDataTransformer.get(queue, [spec], [spec]))
            arrays.append([cla.to_device(queue, _random(
                rng, spec.specification.shape, dtype))])
    assert not builds               # nothing is built before the first launch
    for t, a in zip(transformers, arrays, strict=True):
        t.async_pack(a, a)
        t.async_unpack(a, a)
        t.synchronize()
    assert len(builds) == 1


def test_packing_kernels_join_the_build_of_the_part_programs(
        fresh_context, rng):
    queue, builds = fresh_context
    x = pt.make_placeholder("x", (50,), np.float64)
    y = pt.sin(x) + pt.roll(x, 2)
    prg = pt.generate_loopy(y)
    # as a distributed execution: receive buffers before the first part
    spec = HaloExchangeSpec.whole_array((50,), np.float64)
    unpacker = HaloDataTransformer.get(queue, [spec])
    xv = rng.standard_normal(50)
    _, (out,) = prg(queue, x=xv)
    assert len(builds) == 1
    unpacker.get_unpack_buffer().set(xv)
    target = cla.zeros(queue, (50,), np.float64)
    unpacker.async_unpack([target])
    packer = HaloDataTransformer.get(queue, [spec])   # made after the run
    packer.async_pack([target])
    assert len(builds) == 1
    np.testing.assert_array_equal(packer.get_pack_buffer().get(), xv)
    np.testing.assert_allclose(out, np.sin(xv) + np.roll(xv, 2), rtol=1e-14)


def test_merged_kernels_keep_their_own_index_macros(queue):
    # loopy types lid/gid after the kernel's index type: the 64-bit copy
    # kernel and a 32-bit kernel built together must each see their own
    from pytato_like.runtime.halo_opencl import CopyVariant, copy_kernel_source
    from pytato_like.opencl_build import merge_device_code
    narrow = ("#define lid(N) ((int) get_local_id(N))\n"
              "#define gid(N) ((int) get_group_id(N))\n\n"
              "__kernel void narrow(__global int *out)\n"
              "{ out[gid(0) * 4 + lid(0)] = sizeof(lid(0)); }\n")
    wide = copy_kernel_source(CopyVariant(np.dtype(np.uint32), False, 3))
    code = merge_device_code([narrow, wide.device_code])

    def macro_before(kernel):
        head = code[:code.index(kernel)]
        return head[head.rindex("#define lid("):].splitlines()[0]

    assert "(int)" in macro_before("void narrow(")
    assert "(long)" in macro_before(f"{wide.host_function}(")
    # and the OpenCL compiler agrees: sizeof(lid(0)) in the narrow kernel
    prg = cl.Program(queue.context, code).build()
    out = cla.zeros(queue, 8, np.int32)
    prg.narrow(queue, (8,), (4,), out.data)
    np.testing.assert_array_equal(out.get(), 4)


def test_repeated_exchanges_with_other_arrays_equal_numpy(queue, rng):
    # the transformer re-sets only the kernel arguments that changed:
    # alternate between array sets, and change data in place
    specs = [_specs(lay, np.float32) for lay in _layouts()] * 2
    tn = HaloDataTransformer.get(np, specs)
    tc = HaloDataTransformer.get(queue, specs)
    sets = [[_random(rng, s.specification.shape, np.float32) for s in specs]
            for _ in range(2)]
    dev = [[cla.to_device(queue, a) for a in group] for group in sets]
    for turn in range(4):
        which = turn % 2
        if turn == 2:          # same arrays as turn 0, new contents
            sets[0] = [a + 1 for a in sets[0]]
            for d, a in zip(dev[0], sets[0], strict=True):
                d.set(a)
        tn.async_pack(sets[which])
        tc.async_pack(dev[which])
        np.testing.assert_array_equal(tc.get_pack_buffer().get(),
                                      tn.get_pack_buffer())
        # and unpack into the other set
        tc.async_unpack(dev[1 - which])
        tn.get_unpack_buffer()[...] = tc.get_unpack_buffer().get()
        tn.async_unpack(sets[1 - which])
        tc.synchronize()
        for d, h in zip(dev[1 - which], sets[1 - which], strict=True):
            np.testing.assert_array_equal(d.get(), h)
