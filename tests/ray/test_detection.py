"""An actor that dies is detected within two heartbeat intervals (issue 23, faults): killed
idle or mid-batch, by a signal or by Ray, its ``WorkerDown`` comes within ``2 x heartbeat_s``
(plus a margin for this shared machine), its in-flight items come back retriable exactly once,
and a fresh actor answers."""

from __future__ import annotations

import os
import signal
import time

import pytest
import ray

from control import clock
from control.executor.protocol import (
    Batch,
    BatchItem,
    GenParams,
    ItemCompleted,
    ModelRef,
    StepKey,
    WorkerDown,
    WorkerUp,
)
from tests.ray.conftest import remote_device, wait_until

pytestmark = pytest.mark.ray

NOOP = ModelRef("noop", "noop", "tool")
#: scheduling slack on a loaded two-core machine, beyond the two intervals
MARGIN_S = 0.4


def _drain(ex, seconds: float) -> list:
    out, deadline = [], clock.monotonic() + seconds
    while (event := ex.poll(0.0)) is not None:
        out.append(event)
    while clock.monotonic() < deadline:
        event = ex.poll(0.05)
        if event is not None:
            out.append(event)
    return out


def _kill(ex, device: str, how: str) -> float:
    """Kill the device's actor; the instant it was killed."""
    slot = ex._flow.slots[device]  # the actor handle: how a crash outside Ray's view is made
    if how == "signal":
        pid = ex.worker_pid(device) or slot.pid
        killed = clock.monotonic()
        os.kill(pid, signal.SIGKILL)
    else:
        killed = clock.monotonic()
        ray.kill(slot.actor, no_restart=True)
    return killed


def _down_after(ex, device: str, killed: float) -> tuple[float, list]:
    """Seconds from the kill until the device's WorkerDown was seen, and the events until it."""
    seen = []
    deadline = killed + 30
    while clock.monotonic() < deadline:
        event = ex.poll(0.01)
        if event is None:
            continue
        seen.append(event)
        if isinstance(event, WorkerDown) and event.device_id == device:
            return clock.monotonic() - killed, seen
    raise AssertionError(f"no WorkerDown for {device} in 30 s; saw {seen!r}")


def _wait_up(ex, device: str) -> list:
    return wait_until(ex, lambda s: any(isinstance(e, WorkerUp) and e.device_id == device
                                        for e in s), timeout=90)  # fmt: skip


@pytest.mark.parametrize("how", ["signal", "ray_kill"])
def test_an_idle_actor_that_dies_is_down_within_two_heartbeats(rex, how):
    there = remote_device(rex)
    limit = 2 * rex.config.heartbeat_s + MARGIN_S
    _drain(rex, 0.3)
    took, _ = _down_after(rex, there, _kill(rex, there, how))
    print(f"idle {how}: WorkerDown after {took * 1000:.0f} ms")
    assert took <= limit, f"WorkerDown {took:.2f} s after the kill (limit {limit:.2f} s)"
    _wait_up(rex, there)


@pytest.mark.parametrize("how", ["signal", "ray_kill"])
def test_a_busy_actor_that_dies_is_down_within_two_heartbeats_items_retriable_once(rex, how):
    there = remote_device(rex)
    replica = f"busy-{how}"
    assert rex.load(replica, NOOP, there).result(timeout=60).ok
    _drain(rex, 0.3)
    keys = [f"{how}-k{i}" for i in range(3)]
    for i, key in enumerate(keys):  # two run on the actor, the third waits for it here
        item = BatchItem(StepKey(f"det-{how}", key), key, {"x": i}, GenParams(busy_ms=5000))
        rex.submit(Batch(f"b-{key}", replica, (item,)))
    deadline = clock.monotonic() + 20
    while not next(s for s in rex.heartbeat() if s.device_id == there).busy:
        assert clock.monotonic() < deadline, "the batch never ran"
        time.sleep(0.02)
    limit = 2 * rex.config.heartbeat_s + MARGIN_S
    took, seen = _down_after(rex, there, _kill(rex, there, how))
    print(f"busy {how}: WorkerDown after {took * 1000:.0f} ms")
    assert took <= limit, f"WorkerDown {took:.2f} s after the kill (limit {limit:.2f} s)"
    seen += _wait_up(rex, there) + _drain(rex, 1.0)
    done = [e.result for e in seen if isinstance(e, ItemCompleted)]
    assert sorted(r.idempotency_key for r in done) == keys  # each exactly once
    assert all(not r.ok and r.retriable and r.cause == "worker_down" for r in done)
