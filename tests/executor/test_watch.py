"""Health judgement of a worker handle: any message proves life, and silence measured while the
watcher itself was not listening is not held against the worker."""

from __future__ import annotations

import pytest

from control.executor.host.handle import WorkerHandle
from control.executor.protocol import DeviceInfo
from control.executor.worker.main import WorkerConfig

HB = 0.5


class _Alive:
    """A process stand-in that is alive (health looks at ``is_alive`` only)."""

    exitcode = None

    def is_alive(self) -> bool:
        return True


def _up_handle(last_hb: float) -> WorkerHandle:
    handle = WorkerHandle(DeviceInfo("cpu:0", "cpu", 0, 1024, 0), WorkerConfig(heartbeat_s=HB))
    handle.process, handle.up, handle.last_hb = _Alive(), True, last_hb
    return handle


@pytest.mark.parametrize(
    ("silent_s", "verdict"),
    [(0.9, None), (1.1, "hang")],  # two intervals are 1.0 s
)
def test_silence_past_two_intervals_is_a_hang(silent_s, verdict):
    handle = _up_handle(last_hb=10.0)
    found = handle.health(10.0 + silent_s, startup_grace_s=60)
    assert (found[0] if found else None) == verdict


def test_any_message_counts_as_a_sign_of_life():
    handle = _up_handle(last_hb=10.0)
    handle.seen(10.8)  # a result, not a heartbeat
    assert handle.health(11.5, startup_grace_s=60) is None
    assert handle.health(11.9, startup_grace_s=60) is not None


def test_a_late_watcher_forgives_the_silence_once():
    handle = _up_handle(last_hb=10.0)
    handle.forgive_silence(13.0)  # the watcher did not run from 10.1 to 13.0
    assert handle.health(13.0, startup_grace_s=60) is None
    # the worker still gets only its normal allowance from then on
    assert handle.health(13.0 + 2 * HB, startup_grace_s=60) is not None


def test_forgiving_never_extends_a_starting_workers_grace():
    handle = _up_handle(last_hb=0.0)
    handle.up, handle.started_at = False, 0.0
    handle.forgive_silence(100.0)
    assert handle.health(100.0, startup_grace_s=30)[0] == "hang"


def test_a_loading_worker_gets_the_longer_silence_limit():
    handle = _up_handle(last_hb=10.0)
    assert handle.health(12.0, startup_grace_s=60, silence_limit_s=10.0) is None
    assert handle.health(20.5, startup_grace_s=60, silence_limit_s=10.0)[0] == "hang"
