"""What the Ray executor shares with the local one (issue 23): a load that does not fit evicts
least-recently-used idle replicas, never a busy one, and is refused only when even that cannot
make room; a batch that runs past its hang deadline gets its actor killed and restarted, its
items reported ``hang`` once; repeated model errors open the replica's breaker, which refuses
batches until a probe succeeds; streamed text reaches the caller while the batch runs.

Before, on this backend: such a load was refused, a hung batch held its actor for good, there
were no breakers, and every delta of a batch arrived together with its result."""

from __future__ import annotations

import os
import time

import pytest

from control import clock
from control.executor.host.breaker import BreakerConfig
from control.executor.protocol import (
    Batch,
    BatchItem,
    BreakerChanged,
    GenParams,
    ItemCompleted,
    ModelRef,
    ReplicaEvicted,
    StepKey,
    TokenDelta,
    WorkerDown,
    WorkerUp,
)
from control.executor.ray import RayExecutor, RayExecutorConfig
from tests.executor.conftest import all_done, completions
from tests.executor.models import BROKEN, GPT2, NOOP, SILENT
from tests.ray.conftest import remote_device, wait_until
from tests.ray.test_steps_and_faults import drain

pytestmark = pytest.mark.ray

HANG_FLOOR_S = 3.0
COOLDOWN_S = 1.0
MAX_TOKENS = 200  # the streamed batch runs long enough to tell "while" from "at the end"


@pytest.fixture(scope="module")
def rex(cluster, model_cache):
    config = RayExecutorConfig(heartbeat_s=0.4, cache_dir=str(model_cache),
                               hang_floor_s=HANG_FLOOR_S,
                               breaker=BreakerConfig(failure_threshold=2, cooldown_s=COOLDOWN_S))  # fmt: skip
    ex = RayExecutor(config)
    ex.start()
    assert ex.wait_ready(120), "actors did not start"
    yield ex
    ex.stop()


def one(key: str, run: str = "run", **params) -> BatchItem:
    return BatchItem(StepKey(run, key), key, {"x": key}, GenParams(**params))


def status(ex, device_id: str):
    return next(s for s in ex.heartbeat() if s.device_id == device_id)


def until_running(ex, device_id: str, timeout: float = 20.0):
    deadline = clock.monotonic() + timeout
    while not (now := status(ex, device_id)).running:
        assert clock.monotonic() < deadline, f"{device_id} never ran a batch"
        time.sleep(0.02)
    return now


def test_a_load_that_does_not_fit_evicts_an_idle_replica_never_a_busy_one(rex):
    there = remote_device(rex)
    budget = next(d for d in rex.devices() if d.device_id == there).memory_budget_mib
    part = lambda name, share: ModelRef(name, "noop", "tool", expected_mib=int(budget * share))  # noqa: E731
    assert rex.load("busy", part("busy", 0.4), there).result(60).ok
    drain(rex, 0.0)
    rex.submit(Batch("long", "busy", (one("ev-busy", busy_ms=2000),)))  # within its deadline
    assert status(rex, there).busy  # a batch of "busy" is in flight on the actor
    # loaded while it runs: "busy" is the least recently used, but not idle
    assert rex.load("idle", part("idle", 0.4), there).result(60).ok
    report = rex.load("third", part("third", 0.4), there).result(60)
    assert report.ok and report.evicted == ("idle",), report
    # even evicting every idle replica (third) leaves too little room beside the busy one
    refused = rex.load("huge", part("huge", 0.7), there).result(60)
    assert not refused.ok and "does not fit" in refused.reason and not refused.evicted
    assert {"busy", "third"} <= set(status(rex, there).replicas)
    assert "huge" not in status(rex, there).replicas
    seen = wait_until(rex, all_done(["ev-busy"]))
    assert completions(seen)["ev-busy"].ok  # the busy replica was never evicted
    evicted = [e for e in seen if isinstance(e, ReplicaEvicted)]
    assert [(e.replica_id, e.device_id) for e in evicted] == [("idle", there)]
    assert evicted[0].freed_mib == int(budget * 0.4) and "LRU" in evicted[0].reason
    rex.submit(Batch("gone", "idle", (one("ev-gone"),)))
    gone = completions(wait_until(rex, all_done(["ev-gone"])))["ev-gone"]
    assert gone.cause == "unavailable" and "not loaded" in gone.error
    for replica_id in ("busy", "third"):
        rex.unload(replica_id).result(30)


def test_a_hung_batch_is_reported_hang_once_and_its_actor_restarted(rex):
    there = remote_device(rex)
    assert rex.load("silent", SILENT, there).result(60).ok
    pid = rex.worker_pid(there)
    drain(rex, 0.0)
    submitted = clock.monotonic()
    rex.submit(Batch("stuck", "silent", (one("h-1", busy_ms=60_000),)))
    rex.submit(Batch("behind", "silent", (one("h-2"),)))  # waits in the actor's queue
    running = until_running(rex, there).running
    assert [r.batch_id for r in running] == ["stuck"]  # the one behind it is not running yet
    assert running[0].deadline_s == HANG_FLOOR_S and running[0].running_for_s < HANG_FLOOR_S
    seen = wait_until(rex, lambda s: any(isinstance(e, WorkerDown) for e in s), 30)
    detected = clock.monotonic() - submitted
    seen += wait_until(rex, lambda s: any(isinstance(e, WorkerUp) for e in s), 90)
    seen += drain(rex, 1.0)  # nothing more comes for these keys
    done = [e.result for e in seen if isinstance(e, ItemCompleted)]
    assert sorted(r.idempotency_key for r in done) == ["h-1", "h-2"]  # each exactly once
    causes = {r.idempotency_key: r.cause for r in done}
    assert causes == {"h-1": "hang", "h-2": "worker_down"} and all(r.retriable for r in done)
    down = next(e for e in seen if isinstance(e, WorkerDown))
    assert down.device_id == there and "hung" in down.reason and "stuck" in down.reason
    assert sorted(down.failed_items) == ["h-1", "h-2"] and down.lost_replicas == ("silent",)
    # at its deadline, no earlier; seen on the executor's tick (plus slack on shared cores)
    assert HANG_FLOOR_S <= detected <= HANG_FLOOR_S + 2 * rex.config.heartbeat_s + 1.5
    up = next(e for e in seen if isinstance(e, WorkerUp))
    assert up.device_id == there and up.restarts == 1 and up.pid != pid
    with pytest.raises(ProcessLookupError):  # the hung actor was killed
        os.kill(pid, 0)
    assert not status(rex, there).running
    # the fresh actor serves
    assert rex.load("noop-after", NOOP, there).result(60).ok
    rex.submit(Batch("after", "noop-after", (one("h-3"),)))
    assert completions(wait_until(rex, all_done(["h-3"])))["h-3"].ok


def test_repeated_model_errors_open_the_breaker_then_a_probe_closes_it(rex):
    assert rex.load("flaky", BROKEN, "cpu:0").result(60).ok
    drain(rex, 0.0)
    seen: list = []
    for i in range(2):  # the breaker's threshold
        rex.submit(Batch(f"f{i}", "flaky", (one(f"f-{i}"),)))
        seen += wait_until(rex, all_done([f"f-{i}"]))
        failed = completions(seen)[f"f-{i}"]
        assert not failed.ok and failed.retriable and failed.cause == "model_error"
    assert rex.breaker_state("flaky") == "open"
    # the breaker is reported before the failure that opened it (the core then never retries
    # that failure onto the open replica)
    order = [("breaker" if isinstance(e, BreakerChanged) else e.result.idempotency_key)
             for e in seen if isinstance(e, BreakerChanged | ItemCompleted)]  # fmt: skip
    assert order == ["f-0", "breaker", "f-1"], order
    rex.submit(Batch("f-refused", "flaky", (one("f-9"),)))
    seen += wait_until(rex, all_done(["f-9"]))
    refused = completions(seen)["f-9"]  # the breaker's words: refused before the actor
    assert refused.cause == "unavailable" and "circuit open after 2 failures" in refused.error
    # the replica is mended (loaded again, under its id); after the cooldown one probe goes
    rex.unload("flaky").result(30)
    assert rex.load("flaky", NOOP, "cpu:0").result(60).ok
    time.sleep(COOLDOWN_S)
    rex.submit(Batch("probe", "flaky", (one("p-1", busy_ms=800),)))
    rex.submit(Batch("second", "flaky", (one("p-2"),)))  # while the probe runs: refused
    seen += wait_until(rex, all_done(["p-1", "p-2"]))
    seen += drain(rex, 0.3)
    results = completions(seen)
    assert results["p-1"].ok
    assert results["p-2"].cause == "unavailable" and "waiting for the probe" in results["p-2"].error
    changes = [(e.replica_id, e.state) for e in seen if isinstance(e, BreakerChanged)]
    assert changes == [("flaky", "open"), ("flaky", "closed")]
    assert rex.breaker_state("flaky") == "closed"
    rex.submit(Batch("again", "flaky", (one("p-2"),)))
    assert completions(wait_until(rex, all_done(["p-2"])))["p-2"].ok


def test_streamed_text_arrives_while_the_batch_runs(rex):
    assert rex.load("gen", GPT2, "cpu:0").result(60).ok
    drain(rex, 0.0)
    item = BatchItem(StepKey("run-g", "gen"), "g-1", {"prompt": "the quick brown fox"},
                     GenParams(max_tokens=MAX_TOKENS, temperature=0.8, seed=3, stream=True))  # fmt: skip
    rex.submit(Batch("g1", "gen", (item,)))
    arrived: list[tuple[float, object]] = []
    deadline = clock.monotonic() + 60
    while not any(isinstance(e, ItemCompleted) for _, e in arrived):
        assert clock.monotonic() < deadline, arrived
        event = rex.poll(0.05)
        if event is not None:
            arrived.append((clock.monotonic(), event))
    deltas = [(t, e) for t, e in arrived if isinstance(e, TokenDelta)]
    done_at, done = next((t, e.result) for t, e in arrived if isinstance(e, ItemCompleted))
    assert done.ok and done.output_tokens > 1
    indices = [e.index for _, e in deltas]
    assert len(deltas) > 1 and indices == sorted(set(indices))
    text = rex.fetch_output("run-g", "gen").result(timeout=10)["text"]
    assert "".join(e.text for _, e in deltas) == text
    # the first text came while the batch ran, well before its result (all at once before)
    first_at = deltas[0][0]
    assert done_at - first_at >= 0.3 * done.device_ms / 1000.0, (done_at - first_at, done)
