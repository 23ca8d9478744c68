"""Issue 34, item 6: distributed results follow the ``out_host`` rule.

pytato's ``execute_distributed_partition`` returns what the part programs
return, and a bound program called without ``out_host`` follows loopy's
rule: NumPy arguments (bound data included) give NumPy results, device
arrays give device results. So data wrappers of NumPy data and NumPy
``input_args`` give NumPy results; device data stays on the device;
``out_host=True/False`` (an extension) forces either.

Checked in one process (``mpi_communicator=None``, messages to the rank
itself) and under ``mpiexec`` on 2 and 3 ranks (``tests/mpi/out_host.py``,
each launch bounded in time), always against NumPy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _mpiexec import mpiexec_path

import pytato_like as pt

cl = pytest.importorskip("pyopencl")
cla = pytest.importorskip("pyopencl.array")

pytestmark = pytest.mark.usefixtures("loopy_cache_dir")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "mpi" / "out_host.py"
CASES = ["host", "device", "mixed", "forced", "numpy_parts"]
#: a launch must end well within this (seconds)
MPI_BOUND = 300


# {{{ one process

def _self_exchange(weights):
    """``out = 2 * x * w + (x * w)[::-1]``, the reversed half received from
    this rank itself."""
    x = pt.make_placeholder("x", (5,), np.float64)
    y = x * pt.make_data_wrapper(weights)
    back = pt.staple_distributed_send(
        y, dest_rank=0, comm_tag="self",
        stapled_to=pt.make_distributed_recv(src_rank=0, comm_tag="self",
                                            shape=(5,), dtype=np.float64))
    out = 2 * y + back[::-1]
    partition = pt.find_distributed_partition(
        None, pt.make_dict_of_named_arrays({"out": out, "neg": out < 3}))
    partition, _ = pt.number_distributed_tags(None, partition, base_tag=10)
    return partition, pt.generate_code_for_partition(partition)


XV = np.linspace(0.0, 2.0, 5)
WV = np.array([1.0, 0.5, 2.0, -1.0, 3.0])
REF_OUT = 2 * XV * WV + (XV * WV)[::-1]


def _check(got, on_host):
    for name, want in (("out", REF_OUT), ("neg", REF_OUT < 3)):
        value = got[name]
        if on_host:
            assert isinstance(value, np.ndarray), (name, type(value))
        else:
            assert isinstance(value, cla.Array), (name, type(value))
            value = value.get()
        assert value.dtype == want.dtype
        np.testing.assert_allclose(value, want, rtol=1e-14)


def test_numpy_data_and_inputs_give_numpy_results(queue):
    partition, prgs = _self_exchange(WV)
    for _ in range(3):        # the first execution, then the steady loop
        got = pt.execute_distributed_partition(partition, prgs, queue, None,
                                               input_args={"x": XV})
        _check(got, on_host=True)
    handle = pt.execute_distributed_partition_async(
        partition, prgs, queue, None, input_args={"x": XV})
    _check(handle.wait(), on_host=True)


def test_device_data_gives_device_results(queue):
    partition, prgs = _self_exchange(cla.to_device(queue, WV))
    got = pt.execute_distributed_partition(
        partition, prgs, queue, None, input_args={"x": cla.to_device(queue, XV)})
    _check(got, on_host=False)
    # one device array among host ones is enough, as in loopy
    got = pt.execute_distributed_partition(partition, prgs, queue, None,
                                           input_args={"x": XV})
    _check(got, on_host=False)
    partition, prgs = _self_exchange(WV)
    got = pt.execute_distributed_partition(
        partition, prgs, queue, None, input_args={"x": cla.to_device(queue, XV)})
    _check(got, on_host=False)


def test_out_host_forces_either(queue):
    partition, prgs = _self_exchange(WV)
    got = pt.execute_distributed_partition(partition, prgs, queue, None,
                                           input_args={"x": XV}, out_host=False)
    _check(got, on_host=False)
    got = pt.execute_distributed_partition(
        partition, prgs, queue, None, input_args={"x": cla.to_device(queue, XV)},
        out_host=True)
    _check(got, on_host=True)


def test_the_rule_by_itself(queue):
    from pytato_like.distributed.execute import outputs_on_host
    host, _ = _self_exchange(WV)
    device, _ = _self_exchange(cla.to_device(queue, WV))
    assert outputs_on_host(host, {"x": XV, "s": 2.0})
    assert outputs_on_host(host, {})
    assert not outputs_on_host(host, {"x": cla.to_device(queue, XV)})
    assert not outputs_on_host(device, {"x": XV})

# }}}


# {{{ under MPI

@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 3])
def test_ranks_get_numpy_results_from_numpy_data(n):
    pytest.importorskip("mpi4py")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [mpiexec_path(), "-n", str(n), sys.executable, str(SCRIPT), *CASES],
        capture_output=True, text=True, timeout=MPI_BOUND, cwd=ROOT, env=env,
        stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for case in CASES:
        for rank in range(n):
            assert f"OK {case} rank {rank}" in proc.stdout, (case, rank,
                                                             proc.stdout)

# }}}
