"""Under ``mpiexec -n N``: print each rank's OpenCL compute units and the
limit ``pytato_like.distributed.threads`` put in force (by default the
rank's share of the cores; the test also checks that share) when the
program's first distributed step (here a receive node) comes before its
context."""

import os

from mpi4py import MPI

import pytato_like as pt
from pytato_like.distributed.threads import configure_device_threads

import pyopencl as cl  # noqa: E402 -- after pytato_like, like a user would

# a distributed program's first step sets the device threads (not the
# import: it reads no environment)
pt.make_distributed_recv(0, "halo", (1,))

ctx = cl.create_some_context(interactive=False)
units = ctx.devices[0].max_compute_units
# the limit in force: the default, or what the environment already set
expected = configure_device_threads() or len(os.sched_getaffinity(0))
print(f"rank {MPI.COMM_WORLD.Get_rank()} compute units {units} expected "
      f"{expected}", flush=True)
