"""Halo packing (pytato_like.runtime.halo): every rotation, scalar and vector
quantities, NumPy and OpenCL variants, against a NumPy reference written
here from the documented convention (clockwise turn = np.rot90 from the y
axis towards the x axis; vector (x, y) -> (y, -x) per turn)."""

from __future__ import annotations

import numpy as np
import pytest

from pytato_like.diagnostic import HaloSpecError, QuantityMismatchError
from pytato_like.runtime.halo import (
    HaloDataTransformer,
    HaloDataTransformerNumpy,
    HaloDataTransformerOpenCL,
    HaloExchangeSpec,
    QuantityHaloSpec,
)
from pytato_like.runtime.pool import get_buffer_pool

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")


# {{{ independent reference

def ref_turn_2d(a, k):
    """k clockwise quarter turns of a 2-D array by brute force, x along axis
    0 pointing right, y along axis 1 pointing up: one turn moves the value
    at (x, y) to (y, nx - 1 - x)."""
    for _ in range(k % 4):
        nx, ny = a.shape
        out = np.empty((ny, nx), a.dtype)
        for x in range(nx):
            for y in range(ny):
                out[y, nx - 1 - x] = a[x, y]
        a = out
    return a


def ref_turn_rot90(a, k, x_axis=0, y_axis=1):
    return np.rot90(a, k, axes=(y_axis, x_axis))


def ref_pack_scalar(arrays, specs):
    return np.concatenate([
        ref_turn_rot90(a[s.pack_slices], s.pack_clockwise_rotation,
                       s.specification.x_axis, s.specification.y_axis).ravel()
        for a, s in zip(arrays, specs, strict=True)])


def ref_pack_vector(xs, ys, specs_x, specs_y):
    parts = []
    for x, y, sx, sy in zip(xs, ys, specs_x, specs_y, strict=True):
        k = sx.pack_clockwise_rotation % 4
        q = sx.specification
        tx = ref_turn_rot90(x[sx.pack_slices], k, q.x_axis, q.y_axis)
        ty = ref_turn_rot90(y[sy.pack_slices], k, q.x_axis, q.y_axis)
        new_x, new_y = {0: (tx, ty), 1: (ty, -tx), 2: (-tx, -ty),
                        3: (-ty, tx)}[k]
        parts += [new_x.ravel(), new_y.ravel()]
    return np.concatenate(parts)

# }}}


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_rot90_reference_matches_pointwise_turn(k):
    a = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(ref_turn_rot90(a, k), ref_turn_2d(a, k))


def make_specs(rotation, dims=None, shape=(6, 7, 3), dtype=np.float64):
    """Three quantities with different regions, all with the same turns."""
    q = QuantityHaloSpec(shape, dtype, dims, n_halo=2)
    ax = [slice(None)] * len(shape)

    def region(x_sl, y_sl):
        sl = list(ax)
        sl[q.x_axis], sl[q.y_axis] = x_sl, y_sl
        return tuple(sl)

    def unpack_region(pack):
        # the receiver's region has the turned shape; place it in a corner
        shape_p = HaloExchangeSpec(q, pack, rotation, pack).packed_shape
        return tuple(slice(0, n) for n in shape_p)

    packs = [region(slice(0, 2), slice(2, 5)),          # west edge
             region(slice(-2, None), slice(1, -1)),     # east edge
             region(slice(1, 5, 2), slice(0, 2))]       # strided south edge
    return [HaloExchangeSpec(q, p, rotation, unpack_region(p)) for p in packs]


def to_variant(queue, variant, arrays):
    return [cla.to_device(queue, a) for a in arrays] if variant == "cl" \
        else [a.copy() for a in arrays]


def get_buffer(t, variant):
    buf = t.get_pack_buffer()
    return buf.get() if variant == "cl" else buf


VARIANTS = ["numpy", "cl"]
# (dims, shape): x on axis 0 and y on axis 1, or both moved behind z
DIMS = [(None, (6, 7, 3)), (("z", "y", "x"), (3, 7, 6))]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("rotation", [0, 1, 2, 3])
@pytest.mark.parametrize("dims", DIMS)
def test_pack_scalar_every_rotation(queue, rng, variant, rotation, dims):
    specs = make_specs(rotation, *dims)
    arrays = [rng.standard_normal(specs[0].specification.shape) for _ in specs]
    t = HaloDataTransformer.get(queue if variant == "cl" else np, specs)
    t.async_pack(to_variant(queue, variant, arrays))
    np.testing.assert_array_equal(get_buffer(t, variant),
                                  ref_pack_scalar(arrays, specs))
    t.finalize()


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("rotation", [0, 1, 2, 3])
@pytest.mark.parametrize("dims", DIMS)
def test_pack_vector_every_rotation(queue, rng, variant, rotation, dims):
    specs = make_specs(rotation, *dims)
    xs = [rng.standard_normal(s.specification.shape) for s in specs]
    ys = [rng.standard_normal(s.specification.shape) for s in specs]
    t = HaloDataTransformer.get(queue if variant == "cl" else np, specs, specs)
    t.async_pack(to_variant(queue, variant, xs), to_variant(queue, variant, ys))
    np.testing.assert_array_equal(get_buffer(t, variant),
                                  ref_pack_vector(xs, ys, specs, specs))
    t.finalize()


def test_vector_quarter_turn_of_an_east_pointing_field_points_south():
    # a uniform field (1, 0) turned once clockwise is (0, -1) everywhere
    q = QuantityHaloSpec((4, 4), np.float64)
    spec = HaloExchangeSpec(q, (slice(0, 2), slice(0, 4)), 1,
                            (slice(0, 4), slice(0, 2)))
    t = HaloDataTransformer.get(np, [spec], [spec])
    t.async_pack([np.ones((4, 4))], [np.zeros((4, 4))])
    buf = t.get_pack_buffer()
    np.testing.assert_array_equal(buf[:8], 0.0)
    np.testing.assert_array_equal(buf[8:], -1.0)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("vector", [False, True])
def test_unpack_writes_unpack_regions(queue, rng, variant, vector):
    specs = make_specs(1)
    shape = specs[0].specification.shape
    t = HaloDataTransformer.get(queue if variant == "cl" else np, specs,
                                specs if vector else None)
    n = sum(s.unpack_shape[0] * s.unpack_shape[1] * s.unpack_shape[2]
            for s in specs) * (2 if vector else 1)
    incoming = rng.standard_normal(n)
    ubuf = t.get_unpack_buffer()
    if variant == "cl":
        ubuf.set(incoming)
    else:
        ubuf[:] = incoming
    xs = [np.zeros(shape) for _ in specs]
    ys = [np.full(shape, 7.0) for _ in specs]
    dx, dy = to_variant(queue, variant, xs), to_variant(queue, variant, ys)
    t.async_unpack(dx, dy if vector else None)
    t.synchronize()
    assert t.ready()
    # reference: walk the incoming buffer in layout order
    offset = 0
    for i, s in enumerate(specs):
        for ref in ((xs[i], ys[i]) if vector else (xs[i],)):
            size = int(np.prod(s.unpack_shape))
            ref[s.unpack_slices] = incoming[offset:offset + size].reshape(
                s.unpack_shape)
            offset += size
    got_x = [a.get() if variant == "cl" else a for a in dx]
    got_y = [a.get() if variant == "cl" else a for a in dy]
    for got, ref in zip(got_x + (got_y if vector else []),
                        xs + (ys if vector else []), strict=True):
        np.testing.assert_array_equal(got, ref)
    if not vector:  # y arrays untouched
        for got in got_y:
            np.testing.assert_array_equal(got, 7.0)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("rotation", [0, 1, 2, 3])
@pytest.mark.parametrize("vector", [False, True])
def test_exchange_between_two_tiles_places_turned_edge(queue, rng, variant,
                                                       rotation, vector):
    # tile A sends its east edge; tile B receives it into a corner of its
    # halo (shaped like the turned edge), checked by brute force.
    n, h = 5, 2
    q = QuantityHaloSpec((n + 2 * h, n + 2 * h), np.float64, n_halo=h)
    east = (slice(n, n + h), slice(h, h + n))
    send = HaloExchangeSpec(q, east, rotation, east)
    recv = HaloExchangeSpec(q, east, 0,
                            tuple(slice(0, s) for s in send.packed_shape))
    ax, ay = rng.standard_normal(q.shape), rng.standard_normal(q.shape)
    on = (lambda a: cla.to_device(queue, a)) if variant == "cl" else np.copy
    back = (lambda a: a.get()) if variant == "cl" else (lambda a: a)
    mod = queue if variant == "cl" else np
    ta = HaloDataTransformer.get(mod, [send], [send] if vector else None)
    tb = HaloDataTransformer.get(mod, [recv], [recv] if vector else None)
    bx = on(np.zeros(q.shape))
    by = on(np.zeros(q.shape))
    ta.async_pack([on(ax)], [on(ay)] if vector else None)
    tb.get_unpack_buffer()[:] = ta.get_pack_buffer()   # "communication"
    tb.async_unpack([bx], [by] if vector else None)
    tb.synchronize()
    tx, ty = ref_turn_2d(ax[east], rotation), ref_turn_2d(ay[east], rotation)
    if not vector:
        expected = [(bx, tx)]
    else:
        new_x, new_y = {0: (tx, ty), 1: (ty, -tx), 2: (-tx, -ty),
                        3: (-ty, tx)}[rotation]
        expected = [(bx, new_x), (by, new_y)]
    for got, want in expected:
        got = back(got)
        np.testing.assert_array_equal(got[recv.unpack_slices], want)
        outside = np.ones(q.shape, bool)
        outside[recv.unpack_slices] = False
        np.testing.assert_array_equal(got[outside], 0.0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_one_contiguous_buffer_per_exchange(queue, variant):
    specs = make_specs(1)
    t = HaloDataTransformer.get(queue if variant == "cl" else np, specs, specs)
    buf = t.get_pack_buffer()
    assert buf.ndim == 1 and buf.flags.c_contiguous
    sizes = [seg.size for seg in t.pack_layout]
    assert len(sizes) == 2 * len(specs)
    assert buf.size == sum(sizes)
    # segments are adjacent, in descriptor order
    offsets = [seg.offset for seg in t.pack_layout]
    ends = [seg.offset + seg.nbytes for seg in t.pack_layout]
    assert offsets[0] == 0 and offsets[1:] == ends[:-1]
    assert ends[-1] == buf.nbytes
    t.finalize()


def test_mixed_dtypes_share_one_aligned_byte_buffer(rng):
    shapes = [((3, 5), np.float32), ((4,), np.int64), ((2, 2), np.complex128),
              ((7,), np.uint8)]
    specs = [HaloExchangeSpec.whole_array(s, d) for s, d in shapes]
    arrays = [(rng.standard_normal(s) * 10).astype(d) for s, d in shapes]
    t = HaloDataTransformer.get(np, specs)
    t.async_pack(arrays)
    buf = t.get_pack_buffer()
    assert buf.dtype == np.uint8 and buf.ndim == 1
    for seg, a in zip(t.pack_layout, arrays, strict=True):
        assert seg.offset % 16 == 0
        np.testing.assert_array_equal(
            buf[seg.offset:seg.offset + seg.nbytes].view(a.dtype).reshape(
                a.shape), a)
    # the receiving side sees the same arrays through zero-copy views
    t.get_unpack_buffer()[:] = buf
    views = t.unpacked_views()
    for v, a in zip(views, arrays, strict=True):
        np.testing.assert_array_equal(v, a)
        assert np.shares_memory(v, t.get_unpack_buffer())


def test_opencl_mixed_dtypes_equal_numpy(queue, rng):
    shapes = [((3, 5), np.float32), ((4,), np.int64), ((2, 2), np.complex128)]
    specs = [HaloExchangeSpec.whole_array(s, d) for s, d in shapes]
    arrays = [(rng.standard_normal(s) * 10).astype(d) for s, d in shapes]
    tn = HaloDataTransformer.get(np, specs)
    tc = HaloDataTransformer.get(queue, specs)
    tn.async_pack(arrays)
    tc.async_pack([cla.to_device(queue, a) for a in arrays])
    host, dev = tn.get_pack_buffer(), tc.get_pack_buffer().get()
    for seg in tc.pack_layout:   # padding bytes between segments are unset
        np.testing.assert_array_equal(dev[seg.offset:seg.offset + seg.nbytes],
                                      host[seg.offset:seg.offset + seg.nbytes])
    tc.get_unpack_buffer().set(tn.get_pack_buffer())
    out = [cla.zeros(queue, s, d) for s, d in shapes]
    tc.async_unpack(out)
    for o, a in zip(out, arrays, strict=True):
        np.testing.assert_array_equal(o.get(), a)


def test_opencl_variant_is_asynchronous_and_tracks_events(queue, rng):
    specs = make_specs(3)
    arrays = [rng.standard_normal(s.specification.shape) for s in specs]
    t = HaloDataTransformer.get(queue, specs)
    assert isinstance(t, HaloDataTransformerOpenCL)
    t.async_pack([cla.to_device(queue, a) for a in arrays])
    assert len(t._events) == 1          # one launch for the 3 segments
    t.synchronize()
    assert t.ready() and not t._events
    # one loopy kernel copies every segment, whatever its shape
    assert t.kernel_sources["pack"].count("__kernel") == 1
    assert "_pt_halo_copy_uint64_3d_x8(" in t.kernel_sources["pack"]


def test_buffers_return_to_the_pool_and_are_reused():
    specs = [HaloExchangeSpec.whole_array((11, 13), np.float64)]
    pool = get_buffer_pool(np)
    t = HaloDataTransformer.get(np, specs)
    buf_id = id(t.get_pack_buffer())
    free_before = pool.n_free
    t.finalize()
    assert pool.n_free == free_before + 2        # pack and unpack buffer
    t.finalize()                                  # idempotent
    assert pool.n_free == free_before + 2
    t2 = HaloDataTransformer.get(np, specs)
    reused = pool.n_reused
    ids = {id(t2.get_pack_buffer()), id(t2.get_unpack_buffer())}
    assert buf_id in ids
    assert pool.n_reused == reused + 2
    t2.finalize()


def test_deleted_transformer_returns_buffers():
    specs = [HaloExchangeSpec.whole_array((17, 3), np.int32)]
    pool = get_buffer_pool(np)
    t = HaloDataTransformer.get(np, specs)
    t.get_pack_buffer()
    free_before = pool.n_free
    del t
    assert pool.n_free == free_before + 2


def test_get_returns_variant_for_module_or_queue(queue):
    specs = [HaloExchangeSpec.whole_array((2,), np.float64)]
    assert isinstance(HaloDataTransformer.get(np, specs),
                      HaloDataTransformerNumpy)
    assert isinstance(HaloDataTransformer.get(queue, specs),
                      HaloDataTransformerOpenCL)
    with pytest.raises(HaloSpecError, match="numpy module or a pyopencl"):
        HaloDataTransformer.get("numpy", specs)


# {{{ bad input

def test_spec_slice_past_the_end_is_rejected():
    q = QuantityHaloSpec((6, 7), np.float64)
    with pytest.raises(HaloSpecError, match=r"extent 7 \(quantity shape \(6, 7\)\)"):
        HaloExchangeSpec(q, (slice(0, 2), slice(5, 9)), 0,
                         (slice(0, 2), slice(0, 2)))
    with pytest.raises(HaloSpecError, match="extent 6"):
        HaloExchangeSpec(q, (slice(0, 2), slice(0, 2)), 0,
                         (slice(-8, None), slice(0, 2)))


def test_spec_needs_one_slice_per_axis():
    q = QuantityHaloSpec((6, 7, 2), np.float64)
    with pytest.raises(HaloSpecError, match=r"2 slices .* shape \(6, 7, 2\)"):
        HaloExchangeSpec(q, (slice(0, 2), slice(0, 2)), 0,
                         (slice(0, 2),) * 3)


def test_spec_rejects_negative_steps_and_reversed_bounds():
    q = QuantityHaloSpec((6,), np.float64, dims=("x",))
    with pytest.raises(HaloSpecError, match="step"):
        HaloExchangeSpec(q, (slice(None, None, -1),), 0, (slice(None),))
    with pytest.raises(HaloSpecError, match="ends before it starts"):
        HaloExchangeSpec(q, (slice(4, 2),), 0, (slice(None),))


def test_quarter_turn_needs_x_and_y_axes():
    q = QuantityHaloSpec((6, 3), np.float64, dims=("x", "z"))
    with pytest.raises(HaloSpecError, match=r"dims \('x', 'z'\)"):
        HaloExchangeSpec(q, (slice(0, 2), slice(None)), 1,
                         (slice(0, 2), slice(None)))
    # two turns only reverse the axes that exist
    spec = HaloExchangeSpec(q, (slice(0, 2), slice(None)), 2,
                            (slice(0, 2), slice(None)))
    t = HaloDataTransformer.get(np, [spec])
    a = np.arange(18.0).reshape(6, 3)
    t.async_pack([a])
    np.testing.assert_array_equal(t.get_pack_buffer(), a[1::-1].ravel())


def test_vector_pairs_must_turn_together():
    q = QuantityHaloSpec((4, 4), np.float64)
    sx = HaloExchangeSpec(q, (slice(0, 2), slice(None)), 1,
                          (slice(None), slice(0, 2)))
    sy = HaloExchangeSpec(q, (slice(0, 2), slice(None)), 0,
                          (slice(None), slice(0, 2)))
    with pytest.raises(HaloSpecError, match="x turns 1 times, y turns 0"):
        HaloDataTransformer.get(np, [sx], [sy])


@pytest.mark.parametrize("variant", VARIANTS)
def test_quantity_of_wrong_shape_or_dtype_is_rejected(queue, variant):
    specs = make_specs(0)
    t = HaloDataTransformer.get(queue if variant == "cl" else np, specs)
    good = [np.zeros(s.specification.shape) for s in specs]
    bad_shape = good[:2] + [np.zeros((6, 7, 4))]
    bad_dtype = good[:2] + [np.zeros((6, 7, 3), np.float32)]
    with pytest.raises(QuantityMismatchError,
                       match=r"x-quantity 2 has shape \(6, 7, 4\)"):
        t.async_pack(to_variant(queue, variant, bad_shape))
    with pytest.raises(QuantityMismatchError, match="dtype float32"):
        t.async_unpack(to_variant(queue, variant, bad_dtype))
    with pytest.raises(QuantityMismatchError, match="got 2 x-quantities"):
        t.async_pack(to_variant(queue, variant, good[:2]))
    with pytest.raises(QuantityMismatchError, match="quantities_y was given"):
        t.async_pack(to_variant(queue, variant, good),
                     to_variant(queue, variant, good))


def test_vector_transformer_needs_y_quantities():
    specs = make_specs(0)
    t = HaloDataTransformer.get(np, specs, specs)
    with pytest.raises(QuantityMismatchError, match="quantities_y is missing"):
        t.async_pack([np.zeros(s.specification.shape) for s in specs])


def test_opencl_transformer_rejects_host_arrays(queue):
    specs = [HaloExchangeSpec.whole_array((3,), np.float64)]
    t = HaloDataTransformer.get(queue, specs)
    with pytest.raises(QuantityMismatchError, match="ndarray"):
        t.async_pack([np.zeros(3)])

# }}}

# vim: foldmethod=marker


# {{{ public rotation helpers

@pytest.mark.parametrize("k", [0, 1, 2, 3, -1, 5])
def test_rotate_helpers_match_reference(rng, k):
    from pytato_like.runtime.halo import rotate_scalar_data, rotate_vector_data
    x = rng.standard_normal((4, 6))
    y = rng.standard_normal((4, 6))
    np.testing.assert_array_equal(rotate_scalar_data(x, k), ref_turn_2d(x, k))
    tx, ty = ref_turn_2d(x, k), ref_turn_2d(y, k)
    expected = {0: (tx, ty), 1: (ty, -tx), 2: (-tx, -ty), 3: (-ty, tx)}[k % 4]
    for got, want in zip(rotate_vector_data(x, y, k), expected, strict=True):
        np.testing.assert_array_equal(got, want)

# }}}


def test_opencl_exchange_of_many_quantities_equals_numpy(queue, rng):
    # more quantities than one kernel's argument space would hold if they
    # were the arguments of one kernel (they are launches of one kernel)
    limit = (queue.device.max_parameter_size - 64) // 16
    n = limit + 7
    specs = [HaloExchangeSpec.whole_array((3, 2), np.float32) for _ in range(n)]
    arrays = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(n)]
    tc = HaloDataTransformer.get(queue, specs)
    assert tc.kernel_sources["pack"].count("__kernel") == 1
    tc.async_pack([cla.to_device(queue, a) for a in arrays])
    np.testing.assert_array_equal(tc.get_pack_buffer().get(),
                                  np.concatenate([a.ravel() for a in arrays]))
    tc.get_unpack_buffer().set(tc.get_pack_buffer().get()[::-1].copy())
    out = [cla.zeros(queue, (3, 2), np.float32) for _ in range(n)]
    tc.async_unpack(out)
    tc.synchronize()
    flipped = np.concatenate([a.ravel() for a in arrays])[::-1]
    np.testing.assert_array_equal(np.concatenate([o.get().ravel() for o in out]),
                                  flipped)
