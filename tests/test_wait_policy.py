"""How a rank waits: polls until the condition holds, yields the core
first, then sleeps with a tight timer slack (distributed.safety)."""

from __future__ import annotations

import sys
import threading

import pytest

from pytato_like.diagnostic import DistributedExecutionError
from pytato_like.distributed import safety


def _in_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 -- re-raised below
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert not t.is_alive()
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_poll_until_returns_when_true_after_yields_and_sleeps():
    calls = []

    def test():
        calls.append(1)
        # true only after the yielding polls are used up: sleeps happen too
        return len(calls) > safety.YIELDING_POLLS + 3

    _in_thread(lambda: safety.poll_until(test, None))
    assert len(calls) == safety.YIELDING_POLLS + 4


def test_poll_until_cancelled_raises_typed_error():
    with pytest.raises(DistributedExecutionError, match="cancelled"):
        _in_thread(lambda: safety.poll_until(lambda: False, None,
                                             what="waits for a test",
                                             cancelled=lambda: True))


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="timer slack is a Linux setting")
def test_waiting_thread_gets_tight_timer_slack():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    pr_get_timerslack = 30

    def wait_then_read():
        before = libc.prctl(pr_get_timerslack, 0, 0, 0, 0)
        safety.poll_until(lambda: True, None)
        # the first poll succeeded: still, the thread is set up to wait
        return before, libc.prctl(pr_get_timerslack, 0, 0, 0, 0)

    before, after = _in_thread(wait_then_read)
    assert after == safety.WAIT_TIMER_SLACK_NS
    assert before != after or before == safety.WAIT_TIMER_SLACK_NS
