"""Health judgement of a worker handle: any message proves life, silence measured while the
watcher itself was not listening is not held against the worker, a busy machine's late beats
are tolerated (``missed_heartbeats``), and past that a silent worker is hung only with evidence:
its process used no CPU meanwhile (issue 22: live workers were killed as "no heartbeat for
1.01-1.08 s (limit 1.00 s): hung" on two loaded cores)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from control.executor.host import handle as handle_module
from control.executor.host.config import DEFAULT_MISSED_HEARTBEATS, ExecutorConfig
from control.executor.host.handle import SILENCE_CAP, WorkerHandle, process_cpu_ticks
from control.executor.protocol import DeviceInfo
from control.executor.worker.main import WorkerConfig

HB = 0.5
LIMIT = DEFAULT_MISSED_HEARTBEATS * HB  # 3.0 s


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
    # 1.01-1.08 s killed live workers under the old two-interval limit
    [(0.9, None), (1.08, None), (LIMIT - 0.1, None), (LIMIT + 0.1, "hang")],
)
def test_silence_is_a_hang_only_past_the_missed_heartbeats(silent_s, verdict):
    """Without CPU evidence (no process to read here) silence past the limit decides."""
    handle = _up_handle(last_hb=10.0)
    found = handle.health(10.0 + silent_s, startup_grace_s=60)
    assert (found[0] if found else None) == verdict


def test_the_limit_is_a_setting_of_at_least_two_beats():
    assert ExecutorConfig().missed_heartbeats == DEFAULT_MISSED_HEARTBEATS >= 4
    with pytest.raises(ValueError, match="missed_heartbeats must be >= 2"):
        ExecutorConfig(missed_heartbeats=1)
    handle = _up_handle(last_hb=10.0)
    assert handle.health(12.1, startup_grace_s=60, silence_limit_s=2.0)[0] == "hang"


class _Ticks:
    """``process_cpu_ticks`` stand-in: the CPU ticks the worker's process has used."""

    def __init__(self) -> None:
        self.used = 100

    def __call__(self, pid: int | None) -> int:
        return self.used


@pytest.fixture
def ticks(monkeypatch) -> _Ticks:
    t = _Ticks()
    monkeypatch.setattr(handle_module, "process_cpu_ticks", t)
    return t


def test_a_silent_worker_whose_process_works_is_not_hung(ticks):
    """Starved heartbeats, a busy process: alive. Once it stops using CPU it is hung."""
    handle = _up_handle(last_hb=10.0)
    handle.pid = 4242
    assert handle.health(10.8, startup_grace_s=60) is None  # silence began: CPU noted
    ticks.used += 40
    assert handle.health(10.0 + LIMIT + 0.2, startup_grace_s=60) is None  # it used CPU
    assert handle.health(10.0 + LIMIT + 0.4, startup_grace_s=60) is None  # proven just now
    cause, reason = handle.health(10.0 + LIMIT + 1.0, startup_grace_s=60)  # no CPU since
    assert cause == "hang" and "used no CPU" in reason


def test_a_silent_worker_that_uses_no_cpu_is_hung_at_the_limit(ticks):
    handle = _up_handle(last_hb=10.0)
    handle.pid = 4242
    assert handle.health(10.8, startup_grace_s=60) is None
    assert handle.health(10.0 + LIMIT - 0.1, startup_grace_s=60) is None
    assert handle.health(10.0 + LIMIT + 0.1, startup_grace_s=60)[0] == "hang"


def test_past_the_cap_silence_is_a_hang_even_while_it_works(ticks):
    handle = _up_handle(last_hb=10.0)
    handle.pid = 4242
    handle.health(10.8, startup_grace_s=60)
    now = 10.8
    while now < 10.0 + SILENCE_CAP * LIMIT - 0.5:
        now += 0.5
        ticks.used += 10
        assert handle.health(now, startup_grace_s=60) is None, now
    cause, reason = handle.health(10.0 + SILENCE_CAP * LIMIT + 0.1, startup_grace_s=60)
    assert cause == "hang" and "times the limit" in reason


def test_a_message_ends_the_silence_and_its_cpu_note(ticks):
    handle = _up_handle(last_hb=10.0)
    handle.pid = 4242
    handle.health(10.8, startup_grace_s=60)
    assert handle.cpu_mark is not None
    handle.seen(11.0)
    assert handle.cpu_mark is None
    assert handle.health(11.0 + LIMIT - 0.1, startup_grace_s=60) is None


def test_cpu_ticks_of_a_real_process_grow_while_it_runs_and_stop_when_it_is_stopped():
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        first = process_cpu_ticks(busy.pid)
        assert first is not None
        deadline = time.monotonic() + 10
        while process_cpu_ticks(busy.pid) <= first:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(busy.pid, signal.SIGSTOP)
        time.sleep(0.1)
        stopped = process_cpu_ticks(busy.pid)
        time.sleep(0.3)
        assert process_cpu_ticks(busy.pid) == stopped
    finally:
        busy.kill()
        busy.wait()
    assert process_cpu_ticks(busy.pid) is None  # gone
    assert process_cpu_ticks(None) is None


def test_any_message_counts_as_a_sign_of_life():
    handle = _up_handle(last_hb=10.0)
    handle.seen(10.8)  # a result, not a heartbeat
    assert handle.health(11.5, startup_grace_s=60) is None
    assert handle.health(10.8 + LIMIT - 0.1, startup_grace_s=60) is None
    assert handle.health(10.8 + LIMIT + 0.1, startup_grace_s=60) is not None


def test_a_late_watcher_forgives_the_silence_once():
    handle = _up_handle(last_hb=10.0)
    handle.forgive_silence(13.0)  # the watcher did not run from 10.1 to 13.0
    assert handle.health(13.0, startup_grace_s=60) is None
    # the worker still gets only its normal allowance from then on
    assert handle.health(13.0 + LIMIT, startup_grace_s=60) is not None


def test_forgiving_never_extends_a_starting_workers_grace():
    handle = _up_handle(last_hb=0.0)
    handle.up, handle.started_at = False, 0.0
    handle.forgive_silence(100.0)
    assert handle.health(100.0, startup_grace_s=30)[0] == "hang"


def test_a_loading_worker_gets_the_longer_silence_limit():
    handle = _up_handle(last_hb=10.0)
    assert handle.health(12.0, startup_grace_s=60, silence_limit_s=10.0) is None
    assert handle.health(20.5, startup_grace_s=60, silence_limit_s=10.0)[0] == "hang"
