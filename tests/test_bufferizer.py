"""Bufferizer (pytato_like.runtime.bufferizer): hook order and counts,
wrap-around and full behaviour, flush, view aliasing, device == host."""

from __future__ import annotations

import numpy as np
import pytest

from pytato_like.diagnostic import BufferFullError, QuantityMismatchError
from pytato_like.runtime.bufferizer import Bufferizer

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")


def recording(log, snapshots=None, flush_on_full=False):
    """Hooks that log (hook name, length at call time)."""
    def hook(name):
        def record(b):
            log.append((name, len(b)))
            if name == "full" and snapshots is not None:
                snapshots.append(np.array(b.array if b.queue is None
                                          else b.array.get()))
            if name == "full" and flush_on_full:
                b.flush()
        return record
    return {"flush_hook": hook("flush"), "allocate_hook": hook("allocate"),
            "append_one_hook": hook("one"),
            "append_multiple_hook": hook("multiple"),
            "buffer_full_hook": hook("full")}


def elements(n, shape=(2,), start=0):
    return [np.full(shape, float(start + i)) for i in range(n)]


def test_properties():
    b = Bufferizer((2, 3), 5, np.float32)
    assert b.shape == (5, 2, 3) and b.element_shape == (2, 3)
    assert b.dtype == np.float32 and b.buffer_size == 5
    assert b.element_nbytes == 2 * 3 * 4 and b.nbytes == 5 * 2 * 3 * 4
    assert len(b) == 0 and not b.full
    np.testing.assert_array_equal(b.allocation, 0)      # zero-initialised


def test_hook_order_for_single_appends():
    log = []
    b = Bufferizer((2,), 3, np.float64, **recording(log))
    assert log == []            # the constructor's allocation calls no hook
    for e in elements(3):
        b.append_one(e)
    assert log == [("one", 1), ("one", 2), ("one", 3), ("full", 3)]
    np.testing.assert_array_equal(b.array, np.repeat([[0.], [1.], [2.]], 2, 1))


def test_hook_order_for_batches():
    log = []
    b = Bufferizer((2,), 4, np.float64, **recording(log))
    b.append_multiple(np.stack(elements(3)))
    b.append(elements(1, start=3))                     # a list: multiple
    assert log == [("multiple", 3), ("multiple", 4), ("full", 4)]
    b.allocate()
    b.flush(2.5)
    assert log[-2:] == [("allocate", 0), ("flush", 0)]
    np.testing.assert_array_equal(b.allocation, 2.5)


def test_hooks_set_through_methods():
    log = []
    b = Bufferizer((), 2, np.int64)
    hooks = recording(log)
    b.append_one_hook(hooks["append_one_hook"])
    b.buffer_full_hook(hooks["buffer_full_hook"])
    b.flush_hook(hooks["flush_hook"])
    b.allocate_hook(hooks["allocate_hook"])
    b.append_multiple_hook(hooks["append_multiple_hook"])
    b.append_one(np.int64(4))
    b.append([np.int64(5)])
    b.flush()
    b.allocate()
    assert log == [("one", 1), ("multiple", 2), ("full", 2), ("flush", 0),
                   ("allocate", 0)]


def test_append_dispatches_on_shape():
    log = []
    b = Bufferizer((2,), 10, np.float64, **recording(log))
    b.append(np.zeros(2))               # one element
    b.append(np.zeros((3, 2)))          # a batch
    b.append([np.zeros(2)] * 2)         # a list
    assert [name for name, _ in log] == ["one", "multiple", "multiple"]
    assert len(b) == 6


def test_batch_longer_than_free_space_wraps_around_through_full_hook():
    log, snaps = [], []
    b = Bufferizer((2,), 4, np.float64, **recording(log, snaps))
    batch = np.stack(elements(10))
    b.append_multiple(batch)
    assert log == [("full", 4), ("full", 4), ("multiple", 2)]
    np.testing.assert_array_equal(snaps[0], batch[0:4])
    np.testing.assert_array_equal(snaps[1], batch[4:8])
    assert len(b) == 2
    np.testing.assert_array_equal(b.array, batch[8:10])
    # slots past the length keep the previous round's data until overwritten
    np.testing.assert_array_equal(b.allocation[2:], batch[6:8])


def test_append_one_to_full_buffer_with_hook_wraps():
    log = []
    b = Bufferizer((2,), 2, np.float64, **recording(log))
    for e in elements(3):
        b.append_one(e)
    assert log == [("one", 1), ("one", 2), ("full", 2), ("one", 1)]
    np.testing.assert_array_equal(b.allocation, [[2., 2.], [1., 1.]])


def test_full_hook_that_flushes_sees_every_batch_once():
    log, snaps = [], []
    b = Bufferizer((2,), 3, np.float64,
                   **recording(log, snaps, flush_on_full=True))
    stream = elements(7)
    for e in stream:
        b.append(e)
    assert [len(s) for s in snaps] == [3, 3]
    np.testing.assert_array_equal(np.concatenate(snaps), np.stack(stream[:6]))
    assert len(b) == 1
    np.testing.assert_array_equal(b.array, stream[6][None])
    assert log.count(("flush", 0)) == 2


def test_full_buffer_without_hook_raises_and_writes_nothing():
    b = Bufferizer((2,), 4, np.float64)
    b.append(np.stack(elements(3)))
    with pytest.raises(BufferFullError,
                       match=r"4 elements of shape \(2,\) .* room for 1 more, "
                             r"cannot append 2"):
        b.append(np.stack(elements(2, start=10)))
    assert len(b) == 3
    np.testing.assert_array_equal(b.allocation[3], 0.0)
    b.append_one(np.full(2, 9.0))
    assert b.full
    with pytest.raises(BufferFullError):
        b.append_one(np.zeros(2))
    b.flush()
    assert len(b) == 0 and not b.full
    b.append_one(np.ones(2))           # usable again after flush
    assert len(b) == 1


def test_array_is_a_view_sharing_memory():
    b = Bufferizer((3,), 4, np.float64)
    b.append(np.stack(elements(2, shape=(3,))))
    view = b.array
    assert view.shape == (2, 3)
    assert np.shares_memory(view, b.allocation)
    view[0, 1] = 42.0
    assert b.allocation[0, 1] == 42.0
    b.append_one(np.full(3, 7.0))
    assert b.allocation[2, 0] == 7.0 and b.array[2, 0] == 7.0


def test_allocate_gives_fresh_zeroed_storage():
    b = Bufferizer((2,), 3, np.float64)
    b.append(np.stack(elements(2, start=1)))
    old = b.array
    b.allocate()
    assert len(b) == 0
    np.testing.assert_array_equal(b.allocation, 0.0)
    assert not np.shares_memory(old, b.allocation)
    np.testing.assert_array_equal(old, [[1., 1.], [2., 2.]])


@pytest.mark.parametrize("bad, match", [
    (np.zeros(3), r"shape \(3,\)"),
    (np.zeros(2, np.float32), "dtype float32"),
    (np.zeros((2, 3)), r"shape \(2, 3\)"),
])
def test_wrong_shape_or_dtype_is_rejected(bad, match):
    b = Bufferizer((2,), 3, np.float64)
    with pytest.raises(QuantityMismatchError, match=match):
        b.append(bad)
    with pytest.raises(QuantityMismatchError, match=match if bad.ndim == 1
                       else "must have shape"):
        b.append_multiple([bad] if bad.ndim == 1 else bad)
    assert len(b) == 0


def test_host_bufferizer_rejects_device_arrays(queue):
    b = Bufferizer((2,), 3, np.float64)
    with pytest.raises(QuantityMismatchError, match="device array"):
        b.append_one(cla.zeros(queue, 2, np.float64))


def run_sequence(b, make):
    """The same appends on a host or device Bufferizer; *make* turns a host
    array into what that Bufferizer takes."""
    b.append_one(make(np.arange(3.0)))
    b.append([make(np.full(3, 5.0)), make(np.full(3, 6.0))])
    b.append(make(np.arange(12.0).reshape(4, 3)))      # wraps (size 5)
    b.append_one(make(np.full(3, -1.0)))


def test_device_variant_equals_host_variant(queue, monkeypatch):
    host_log, dev_log, host_snaps, dev_snaps = [], [], [], []
    host = Bufferizer((3,), 5, np.float64,
                      **recording(host_log, host_snaps))
    dev = Bufferizer((3,), 5, np.float64, queue=queue,
                     **recording(dev_log, dev_snaps))
    run_sequence(host, lambda a: a)
    device_inputs = []

    def make(a):
        device_inputs.append(cla.to_device(queue, a))
        return device_inputs[-1]

    # appending device arrays must not bring data to the host; the full
    # hook (which snapshots via .get()) is what the user chose to do.
    real_get = cla.Array.get

    def guarded_get(self, *args, **kwargs):
        if any(self is d for d in device_inputs):
            raise AssertionError("device element copied to the host")
        return real_get(self, *args, **kwargs)

    monkeypatch.setattr(cla.Array, "get", guarded_get)
    run_sequence(dev, make)
    monkeypatch.undo()
    assert dev_log == host_log
    assert len(dev) == len(host)
    np.testing.assert_array_equal(dev.allocation.get(), host.allocation)
    for d, h in zip(dev_snaps, host_snaps):
        np.testing.assert_array_equal(d, h)


def test_device_view_aliases_buffer(queue):
    b = Bufferizer((2,), 4, np.float32, queue=queue)
    b.append(cla.to_device(queue, np.ones((3, 2), np.float32)))
    view = b.array
    assert isinstance(view, cla.Array) and view.shape == (3, 2)
    assert view.base_data is b.allocation.base_data
    view.fill(np.float32(4.0))
    np.testing.assert_array_equal(b.allocation.get()[:3], 4.0)
    np.testing.assert_array_equal(b.allocation.get()[3], 0.0)


def test_device_flush_and_host_elements(queue):
    b = Bufferizer((2,), 3, np.int32, queue=queue)
    b.append_one(np.array([1, 2], np.int32))           # host -> device upload
    b.append(np.array([[3, 4], [5, 6]], np.int32))
    np.testing.assert_array_equal(b.array.get(), [[1, 2], [3, 4], [5, 6]])
    b.flush(-1)
    np.testing.assert_array_equal(b.allocation.get(), -1)
    assert len(b) == 0


def test_device_bufferizer_full_without_hook(queue):
    b = Bufferizer((), 2, np.float64, queue=queue)
    b.append(cla.to_device(queue, np.array([1.0, 2.0])))
    with pytest.raises(BufferFullError, match="dtype float64"):
        b.append_one(cla.to_device(queue, np.array(3.0)))


def test_scalars_are_not_cast():
    b = Bufferizer((), 3, np.float32)
    with pytest.raises(QuantityMismatchError, match="dtype float64"):
        b.append_one(1.0)
    b.append_one(np.float32(1.5))
    np.testing.assert_array_equal(b.array, [1.5])
