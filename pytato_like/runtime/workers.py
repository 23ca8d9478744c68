"""Background threads that are kept for the next task instead of ending.

:meth:`~pytato_like.runtime.handles.Handle.run_in_thread` runs each task
(a distributed execution started with ``wait=False``, say) in a thread of
its own -- unless a :meth:`~pytato_like.runtime.handles.Handle.wait`
without a timeout comes first and runs it in the waiting thread.
Starting a thread costs more than it seems: ``Thread.start`` returns only
once the new thread runs, and the new thread, holding the GIL from its
first line on, gives it back only when it blocks or after Python's switch
interval. Measured on the halo benchmark (2 ranks, 10^5
cells per rank, 8 steps): the call that started an execution took 300 µs
of a 1.6 ms execution.

:func:`submit` hands the task to an idle thread that waits for one on its
own queue, and starts a new thread only when none is idle, so tasks
never wait for each other (two executions that need each other's
messages run side by side). A thread idle for :data:`IDLE_S` seconds
ends. The threads are daemon threads named after the task they run. A
process forked from this one starts with no idle thread (threads do not
survive a fork).

.. autofunction:: submit
.. autodata:: IDLE_S
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

#: seconds an idle thread waits for a task before it ends
IDLE_S = 60.0

_lock = threading.Lock()
#: the inboxes of the idle threads (the most recently idle last)
_idle: list[queue.SimpleQueue] = []


def _forget_threads() -> None:
    # (in a forked child: the idle threads stayed in the parent; a task
    # handed to one of their inboxes would never run)
    global _lock
    _lock = threading.Lock()
    _idle.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads)


def submit(task: Callable[[], None], name: str) -> None:
    """Run ``task()`` in an idle thread, or in a new one if none is idle.
    *task* must not raise (wrap it: an exception ends its thread)."""
    with _lock:
        inbox = _idle.pop() if _idle else None
    if inbox is not None:
        inbox.put((task, name))
        return
    inbox = queue.SimpleQueue()
    inbox.put((task, name))
    threading.Thread(target=_work, args=(inbox,), daemon=True,
                     name=name).start()


def _work(inbox: queue.SimpleQueue) -> None:
    me = threading.current_thread()
    while True:
        try:
            task, name = inbox.get(timeout=IDLE_S)
        except queue.Empty:
            with _lock:
                if inbox in _idle:
                    _idle.remove(inbox)
                    return
            # (taken by submit just now: its task is on the way)
            continue
        me.name = name
        task()
        me.name = "pytato_like idle worker"
        with _lock:
            _idle.append(inbox)
