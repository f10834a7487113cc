"""An actor that dies is detected within two heartbeat intervals (issue 23, faults): killed
idle or mid-batch, by a signal or by Ray, its ``WorkerDown`` comes within ``2 x heartbeat_s``
(plus a margin for this shared machine), its in-flight items come back retriable exactly once,
and a fresh actor answers. So does a node killed outright (its raylet gone, its actor orphaned:
the status call says so) and an actor that stops answering as on a frozen or cut-off machine
(the status deadline, :mod:`control.executor.ray.silence`); an actor busy with long batches
while another loads a model beside it is NOT judged lost."""

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
    DeviceJoined,
    GenParams,
    ItemCompleted,
    ModelRef,
    StepKey,
    WorkerDown,
    WorkerUp,
)
from tests.ray.conftest import STORE, remote_device, wait_until

pytestmark = pytest.mark.ray

NOOP = ModelRef("noop", "noop", "tool")
MINILM = ModelRef("minilm", "embed", "minilm")
#: scheduling slack on a loaded two-core machine, beyond the two intervals (the status deadline
#: itself takes up to a quarter of a heartbeat more: a check to find the silence, one to confirm)
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


def _busy_items(ex, device: str, replica: str, tag: str) -> list[str]:
    """Three 5-s items on ``device`` (two run on its actor, one waits); their keys once one runs."""
    keys = [f"{tag}-k{i}" for i in range(3)]
    for i, key in enumerate(keys):
        item = BatchItem(StepKey(f"det-{tag}", key), key, {"x": i}, GenParams(busy_ms=5000))
        ex.submit(Batch(f"b-{key}", replica, (item,)))
    deadline = clock.monotonic() + 20
    while not next(s for s in ex.heartbeat() if s.device_id == device).busy:
        assert clock.monotonic() < deadline, "the batch never ran"
        time.sleep(0.02)
    return keys


def _once_retriable(seen: list, keys: list[str]) -> None:
    done = [e.result for e in seen if isinstance(e, ItemCompleted)]
    assert sorted(r.idempotency_key for r in done) == keys  # each exactly once
    assert all(not r.ok and r.retriable and r.cause == "worker_down" for r in done)


def test_a_node_removed_outright_is_down_within_two_heartbeats_items_retriable_once(rex, cluster):
    c, _ = cluster
    node = c.add_node(num_cpus=1, object_store_memory=STORE)
    there = f"{node.node_id[:8]}/cpu:0"
    wait_until(rex, lambda s: any(isinstance(e, DeviceJoined) and e.device.device_id == there
                                  for e in s), timeout=90)  # fmt: skip
    assert rex.load("doomed", NOOP, there).result(timeout=60).ok
    _drain(rex, 0.3)
    keys = _busy_items(rex, there, "doomed", "node")
    limit = 2 * rex.config.heartbeat_s + MARGIN_S
    killed = clock.monotonic()
    c.remove_node(node, allow_graceful=False)  # raylet and store killed at once, no goodbye
    took, seen = _down_after(rex, there, killed)
    print(f"node removed outright: WorkerDown after {took * 1000:.0f} ms")
    assert took <= limit, f"WorkerDown {took:.2f} s after the kill (limit {limit:.2f} s)"
    # once the node table shows it gone: down for good, nothing failed twice, never up again
    seen += wait_until(rex, lambda s: any(isinstance(e, WorkerDown) and e.device_id == there
                                          and e.gone for e in s), timeout=60)  # fmt: skip
    seen += _drain(rex, 0.5)
    _once_retriable(seen, keys)
    assert not any(isinstance(e, WorkerUp) and e.device_id == there for e in seen)


def test_an_actor_that_stops_answering_is_judged_lost_within_two_heartbeats(rex):
    """As on a frozen machine or one cut off by the network: nothing answers, nothing fails."""
    there = remote_device(rex)
    assert rex.load("frozen", NOOP, there).result(timeout=60).ok
    _drain(rex, 0.3)
    keys = _busy_items(rex, there, "frozen", "stop")
    pid = rex.worker_pid(there) or rex._flow.slots[there].pid
    limit = 2 * rex.config.heartbeat_s + MARGIN_S
    stopped = clock.monotonic()
    os.kill(pid, signal.SIGSTOP)  # the status deadline kills it (a stopped process dies too)
    took, seen = _down_after(rex, there, stopped)
    print(f"actor stopped: WorkerDown after {took * 1000:.0f} ms: {seen[-1].reason}")
    assert took <= limit, f"WorkerDown {took:.2f} s after the stop (limit {limit:.2f} s)"
    assert "no status answer" in seen[-1].reason and not seen[-1].gone
    seen += _wait_up(rex, there) + _drain(rex, 1.0)
    _once_retriable(seen, keys)


def test_a_busy_actor_beside_a_load_is_not_judged_lost(rex):
    """Long MiniLM batches on one actor while the other loads models: both slow their status
    answers (the load holds its interpreter in long stretches), neither is judged lost."""
    there = remote_device(rex)
    assert rex.load("busy-minilm", MINILM, there).result(timeout=120).ok
    _drain(rex, 0.3)
    text = "a sentence about paris, london and the rivers that run through them " * 6
    keys = []
    for b in range(4):
        items = tuple(BatchItem(StepKey(f"long-{b}", "e"), f"long-{b}-{i}", {"text": text},
                                GenParams()) for i in range(48))  # fmt: skip
        keys += [i.idempotency_key for i in items]
        rex.submit(Batch(f"long-{b}", "busy-minilm", items))
    loads = [rex.load(f"beside-{i}", MINILM, "cpu:0") for i in range(2)]
    seen = wait_until(rex, lambda s: sum(isinstance(e, ItemCompleted) for e in s) >= len(keys),
                      timeout=120)  # fmt: skip
    assert all(f.result(timeout=120).ok for f in loads)
    seen += _drain(rex, 1.0)
    assert [e for e in seen if isinstance(e, WorkerDown)] == []
    assert all(e.result.ok for e in seen if isinstance(e, ItemCompleted))
