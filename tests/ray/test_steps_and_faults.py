"""Steps on different nodes: an output moves actor to actor through Ray's object store and the
answer is the local executor's; an actor killed mid-batch gives its items back retriable once,
and a fresh actor takes work again."""

from __future__ import annotations

import os
import signal
import time

import pytest

from control import clock
from control.executor.protocol import (
    Batch,
    BatchItem,
    GenParams,
    InputRef,
    ItemCompleted,
    ModelRef,
    StepKey,
    WorkerDown,
    WorkerUp,
)
from tests.executor.conftest import all_done, completions, make_executor, wait_for
from tests.ray.conftest import remote_device, wait_until

pytestmark = pytest.mark.ray

BERT = ModelRef("tiny-bert", "embed", "tiny", "bert")
NOOP = ModelRef("noop", "noop", "tool")


def two_steps(ex, embed_dev: str, echo_dev: str, run: str) -> list[float]:
    """embed on one device, then a step on the other that takes the vector as its input."""
    assert ex.load(f"bert-{run}", BERT, embed_dev).result(timeout=60).ok
    assert ex.load(f"echo-{run}", NOOP, echo_dev).result(timeout=60).ok
    first = BatchItem(StepKey(run, "embed"), f"{run}-e", {"text": "where is paris"}, GenParams())
    ex.submit(Batch(f"{run}-1", f"bert-{run}", (first,)))
    wait = wait_until if hasattr(ex, "moved_bytes") else wait_for
    assert completions(wait(ex, all_done({f"{run}-e"})))[f"{run}-e"].ok
    ref = InputRef(run, "embed", "vector")
    second = BatchItem(StepKey(run, "echo"), f"{run}-x", {"v": ref}, GenParams(),
                       return_output=True)  # fmt: skip
    ex.submit(Batch(f"{run}-2", f"echo-{run}", (second,)))
    result = completions(wait(ex, all_done({f"{run}-x"})))[f"{run}-x"]
    assert result.ok and result.device_id == echo_dev, result
    assert result.moved_bytes == 32 * 4  # the step reports what moved to it: one float32 vector
    return result.output["v"]


def test_two_steps_on_two_nodes_answer_as_the_local_executor(rex, model_cache):
    here, there = "cpu:0", remote_device(rex)
    assert rex.devices()[0].node != rex.devices()[1].node
    on_ray = two_steps(rex, here, there, "wf1")
    assert rex.moved_bytes("wf1", "echo") == 32 * 4  # one float32 vector, by reference
    assert rex.transfer_totals()["moves"] >= 1
    local = make_executor(model_cache)
    try:
        on_local = two_steps(local, "cpu:0", "cpu:1", "wf1")
    finally:
        local.stop()
    assert len(on_ray) == 32
    assert max(abs(a - b) for a, b in zip(on_ray, on_local, strict=True)) < 1e-6


def test_a_lost_input_fails_unavailable_naming_its_node(rex):
    there = remote_device(rex)
    assert rex.load("echo-lost", NOOP, there).result(timeout=60).ok
    item = BatchItem(StepKey("wf9", "echo"), "wf9-x", {"v": InputRef("wf9", "gone", "vector")},
                     GenParams())  # fmt: skip
    rex.submit(Batch("wf9-2", "echo-lost", (item,)))
    result = completions(wait_until(rex, all_done({"wf9-x"})))["wf9-x"]
    assert result.cause == "unavailable" and result.retriable and result.lost == ("gone",)


def test_an_actor_killed_mid_batch_gives_retriable_results_once(rex):
    there = remote_device(rex)
    assert rex.load("slow", NOOP, there).result(timeout=60).ok
    pid = rex.worker_pid(there)
    assert pid is not None
    drain(rex, 0.0)  # the events of earlier tests (and of the start) are not this test's
    keys = ["k0", "k1", "k2"]
    for i, key in enumerate(keys):  # two run on the actor, the third waits for it here
        item = BatchItem(StepKey("wf5", key), key, {"x": i}, GenParams(busy_ms=5000))
        rex.submit(Batch(f"slow-{key}", "slow", (item,)))
    deadline = clock.monotonic() + 20
    while not next(s for s in rex.heartbeat() if s.device_id == there).busy:
        assert clock.monotonic() < deadline, "the batch never ran"
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    seen = wait_until(rex, lambda s: any(isinstance(e, WorkerUp) and e.device_id == there
                                         for e in s), timeout=90)  # fmt: skip
    seen += drain(rex, 1.5)  # nothing more comes for these keys
    done = [e.result for e in seen if isinstance(e, ItemCompleted)]
    assert sorted(r.idempotency_key for r in done) == keys  # each exactly once
    assert all(not r.ok and r.retriable and r.cause == "worker_down" for r in done)
    down = next(e for e in seen if isinstance(e, WorkerDown))
    assert down.device_id == there and "slow" in down.lost_replicas
    assert sorted(down.failed_items) == keys
    up = next(e for e in seen if isinstance(e, WorkerUp) and e.device_id == there)
    assert up.restarts == 1 and up.pid != pid
    # the runtime reloads the device's replicas on WorkerUp; the retry then runs there
    assert rex.load("slow.1", NOOP, there).result(timeout=60).ok
    retry = BatchItem(StepKey("wf5", "k0", 1), "k0", {"x": 0}, GenParams())
    rex.submit(Batch("slow-retry", "slow.1", (retry,)))
    again = completions(wait_until(rex, all_done({"k0"})))["k0"]
    assert again.ok and not again.replayed and again.device_id == there


def drain(ex, seconds: float) -> list:
    """The events that came by now, and those that come in the next ``seconds``."""
    out, deadline = [], clock.monotonic() + seconds
    while (event := ex.poll(0.0)) is not None:
        out.append(event)
    while clock.monotonic() < deadline:
        event = ex.poll(0.1)
        if event is not None:
            out.append(event)
    return out
