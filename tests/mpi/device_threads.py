"""Under ``mpiexec -n N``: print each rank's OpenCL compute units and the
share of the cores ``pytato_like.distributed.threads`` should give it."""

import os

from mpi4py import MPI

import pytato_like  # noqa: F401 -- sets the device threads on import
from pytato_like.distributed.threads import default_device_threads

import pyopencl as cl  # noqa: E402 -- after pytato_like, like a user would

ctx = cl.create_some_context(interactive=False)
units = ctx.devices[0].max_compute_units
expected = default_device_threads() or len(os.sched_getaffinity(0))
print(f"rank {MPI.COMM_WORLD.Get_rank()} compute units {units} expected "
      f"{expected}", flush=True)
