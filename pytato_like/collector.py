"""Keeping Python's cyclic garbage collector out of code generation and
of repeated executions.

CPython starts a collection of the youngest generation once the tracked
objects allocated and not yet freed pass a threshold (700), and promotes
what is alive then to older generations. An execution of a partition holds
a few hundred part outputs and their dictionaries for its duration, so
collections run in the middle of it and promote those objects; once the
promoted count reaches a quarter of the long-lived objects, a full
collection walks every object of the process -- the DAG, the partition,
the loopy programs. Measured on the halo benchmark's rank (one-cell
halos, 32 steps, 10^5 cells, about 111 000 tracked objects): a full
collection every 20 or so executions, 37-65 ms each, against a median
execution of 5-7 ms; the mean execution time grows by half.

The executions themselves free their temporaries by reference counting
(they make no reference cycles: a collection after ten executions found
nothing to free). So while an execution runs, automatic collection is
paused; once it has ended and dropped its temporaries, the count is back
near where it started and collections resume as before. Measured on the
same rank: 120 executions with two collections in all, none full, the
slowest execution 9 ms.

Code generation (:func:`~pytato_like.generate_loopy`, decorated with
:func:`paused_collection`, as are the package's transforms and analyses
and :func:`~pytato_like.find_distributed_partition`) and the recording
of a program's first call allocate and free millions of small tuples,
lists and dicts next to the user's DAG, and the full collections they
trigger walk that DAG. Measured on a 20 000-step stencil (80 000 nodes),
every cache empty: two full collections during ``generate_loopy`` and
two during its first call took 0.35-0.4 s; paused, code generation went
from 2.1-2.3 s to 1.55-1.63 s and the first call from 0.74-0.79 s to
0.5-0.6 s. A transform over a large DAG was super-linear for the same
reason (16.7 µs a node for 40 000 nodes, 22.6 for 400 000; 16.7 for both
paused). What they leave behind (loopy's garbage on a cache miss
included) is collected by the collections that follow the pause. A warm
start saves the few milliseconds of young collections its code
generation triggered.

Pausing is process-wide (the collector has one switch): an asynchronous
execution's thread pauses collection for the main thread too, until it
ends. Nested or concurrent pauses are counted; collection resumes when
the last ends, and only if it was enabled when the first began (a
program that disabled it itself keeps it disabled). Of a partition's
executions, those after the first are paused as a whole (the first also
runs the application's part of compiling, which is left alone; its code
generation is paused as above). Set ``PYTATO_LIKE_PAUSE_GC=0`` to leave
the collector alone.

.. autofunction:: collection_paused
.. autofunction:: paused_collection
.. autofunction:: pausing_enabled
"""

from __future__ import annotations

import contextlib
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

from pytato_like._env import env_flag

_P = ParamSpec("_P")
_R = TypeVar("_R")

_LOCK = threading.Lock()
#: pauses under way
_DEPTH = 0
#: whether collection was enabled when the outermost pause began
_RESUME = False


def pausing_enabled() -> bool:
    """Whether the package pauses the collector (``PYTATO_LIKE_PAUSE_GC``,
    on by default; read on each call).

    :raises ~pytato_like.diagnostic.ConfigurationError: for a value that
        is not a switch.
    """
    return env_flag("PYTATO_LIKE_PAUSE_GC", True)


@contextlib.contextmanager
def collection_paused(pause: bool = True) -> Iterator[None]:
    """Automatic cyclic garbage collection off for the block (if *pause*);
    restored when the last of the pauses under way ends."""
    global _DEPTH, _RESUME
    if not pause:
        yield
        return
    with _LOCK:
        if _DEPTH == 0:
            _RESUME = gc.isenabled()
            if _RESUME:
                gc.disable()
        _DEPTH += 1
    try:
        yield
    finally:
        with _LOCK:
            _DEPTH -= 1
            if _DEPTH == 0 and _RESUME:
                gc.enable()


def paused_collection(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorator: every call of *func* runs in
    ``collection_paused(pausing_enabled())`` (the setting read at each
    call)."""
    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with collection_paused(pausing_enabled()):
            return func(*args, **kwargs)
    return wrapper
