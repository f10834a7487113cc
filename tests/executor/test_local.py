"""The multi-process executor: real worker processes on CPU slots with tiny models."""

from __future__ import annotations

import os
import signal

import pytest

from control import clock
from control.executor.host.breaker import BreakerConfig
from control.executor.protocol import (
    Batch,
    BatchItem,
    GenParams,
    InputRef,
    ModelRef,
    ReplicaEvicted,
    StepKey,
    TokenDelta,
    WorkerDown,
    WorkerUp,
)
from tests.executor.conftest import all_done, completions, make_executor, wait_for
from tests.executor.models import BERT, BROKEN, GPT2, NOOP, SILENT

HANG_FLOOR_S = 3.0


@pytest.fixture(scope="module")
def ex(model_cache):
    executor = make_executor(
        model_cache,
        memory_budget_mib=64,
        breaker=BreakerConfig(failure_threshold=2, cooldown_s=60),
        hang_floor_s=HANG_FLOOR_S,
    )
    yield executor
    executor.stop()


def load(ex, replica, ref, device):
    report = ex.load(replica, ref, device).result(timeout=60)
    assert report.ok, report.reason
    return report


def wait_for_busy(ex, device_id: str, timeout: float = 10.0) -> None:
    """Until the worker itself says (in a heartbeat) that its main thread runs a batch. Its
    status is not enough: a batch sent to an idle worker is timed, and the status says busy,
    from its send, a moment before the worker has taken it from its inbox."""
    deadline = clock.monotonic() + timeout
    while clock.monotonic() < deadline:
        with ex._lock:
            if ex._workers[device_id].busy:
                return
        ex._stopping.wait(0.02)
    raise AssertionError(f"{device_id} never reported busy")


def one(key, node, inputs, run="run1", **params):
    return BatchItem(StepKey(run, node), key, inputs, GenParams(**params))


def test_devices_are_pinned_cpu_slots_with_heartbeats(ex):
    devices = ex.devices()
    assert [d.device_id for d in devices] == ["cpu:0", "cpu:1"]
    assert {d.cpu_core for d in devices} <= set(os.sched_getaffinity(0))
    status = {s.device_id: s for s in ex.heartbeat()}
    assert all(s.alive and s.last_heartbeat_age_s < 1.0 for s in status.values())
    assert os.sched_getaffinity(ex.worker_pid("cpu:1")) == {devices[1].cpu_core}


def test_pipeline_across_devices_moves_outputs_worker_to_worker(ex):
    load(ex, "embed-a", BERT, "cpu:0")
    docs = ["cats purr softly", "dogs bark loudly", "markets fell"]
    opts = {"documents": docs, "embed_model": BERT}
    load(ex, "search-b", ModelRef("vs", "vector_search", "tool", options=opts), "cpu:1")
    ex.submit(Batch("b1", "embed-a", (one("p-e", "embed", {"text": "cats purr softly"}),)))
    embedded = completions(wait_for(ex, all_done(["p-e"])))["p-e"]
    assert embedded.moved_bytes == 0  # its input came with the batch
    ref = {"query_vector": InputRef("run1", "embed", "vector")}
    ex.submit(Batch("b2", "search-b", (one("p-s", "search", ref, top_k=3),)))
    result = completions(wait_for(ex, all_done(["p-s"])))["p-s"]
    assert result.ok and result.device_id == "cpu:1" and result.item_count == 3
    assert result.moved_bytes == 32 * 4  # the tiny BERT's float32 vector, worker to worker
    output = ex.fetch_output("run1", "search").result(timeout=10)
    assert output["documents"][0] == docs[0]  # identical text: cosine 1 with itself
    assert output["scores"][0] == pytest.approx(1.0, abs=1e-4)


def test_return_output_comes_back_with_the_result_and_needs_no_fetch(ex):
    """A step that feeds the caller sends its output with its result: fetch_output answers at
    once (no round trip to the worker), with the value the worker holds; a step without the
    flag still goes through the worker."""
    load(ex, "embed-r", BERT, "cpu:0")
    item = one("r-e", "embed", {"text": "cats purr softly"}, run="run-r")
    plain = one("r-p", "embed", {"text": "dogs bark"}, run="run-p")
    ex.submit(Batch("br", "embed-r", (BatchItem(item.step, item.idempotency_key, item.inputs,
                                                item.params, return_output=True), plain)))  # fmt: skip
    done = completions(wait_for(ex, all_done(["r-e", "r-p"])))
    assert done["r-e"].ok and len(done["r-e"].output["vector"]) == 32
    assert done["r-p"].ok and done["r-p"].output is None
    returned = ex.fetch_output("run-r", "embed")
    assert returned.done()  # answered without asking the worker
    fetched = ex.fetch_output("run-p", "embed")
    assert len(fetched.result(timeout=10)["vector"]) == 32
    assert returned.result()["vector"] == pytest.approx(done["r-e"].output["vector"])
    ex.release_run("run-r")
    with pytest.raises(KeyError):
        ex.fetch_output("run-r", "embed").result(timeout=10)


def test_released_runs_reach_their_worker_in_one_message(ex):
    """release_run forgets a run's outputs at once here; the worker is told at the executor's
    tick a moment later, several runs in one message, and then no longer holds them."""
    load(ex, "embed-rel", BERT, "cpu:0")
    runs = ["rel-a", "rel-b", "rel-c"]
    items = tuple(one(f"{r}-e", "embed", {"text": f"text of {r}"}, run=r) for r in runs)
    ex.submit(Batch("b-rel", "embed-rel", items))
    wait_for(ex, all_done([f"{r}-e" for r in runs]))
    sent = ex.release_messages
    for run in runs[:2]:
        ex.release_run(run)
        with pytest.raises(KeyError):  # forgotten here at once
            ex.fetch_output(run, "embed").result(timeout=10)
    deadline = clock.monotonic() + 10
    while ex.release_messages == sent and clock.monotonic() < deadline:
        ex._stopping.wait(0.01)
    assert ex.release_messages == sent + 1  # both runs in one message
    # the worker dropped them: a step reading a released output finds it lost; a kept one reads
    use = [one(f"use-{r}", "search", {"query_vector": InputRef(r, "embed", "vector")}, run=r,
               top_k=1) for r in runs]  # fmt: skip
    opts = {"documents": ["a b c"], "embed_model": BERT}
    load(ex, "search-rel", ModelRef("vs", "vector_search", "tool", options=opts), "cpu:0")
    ex.submit(Batch("b-use", "search-rel", tuple(use)))
    done = completions(wait_for(ex, all_done([f"use-{r}" for r in runs])))
    assert [done[f"use-{r}"].ok for r in runs] == [False, False, True]
    assert "input lost" in (done["use-rel-a"].error or "")


def test_generate_streams_and_duplicate_key_is_not_run_twice(ex):
    load(ex, "gen-a", GPT2, "cpu:0")
    item = one(
        "g-1", "gen", {"prompt": "the quick brown fox"}, max_tokens=6, temperature=0.8, stream=True
    )
    ex.submit(Batch("g1", "gen-a", (item,)))
    events = wait_for(ex, all_done(["g-1"]))
    first = completions(events)["g-1"]
    deltas = [e for e in events if isinstance(e, TokenDelta) and e.idempotency_key == "g-1"]
    text = ex.fetch_output("run1", "gen").result(timeout=10)["text"]
    assert first.ok and first.output_tokens == 6 and first.input_tokens > 0
    assert "".join(d.text for d in deltas) == text
    ex.submit(Batch("g2", "gen-a", (item,)))
    again_events = wait_for(ex, all_done(["g-1"]))
    again = completions(again_events)["g-1"]
    assert again.replayed and again.device_ms == first.device_ms
    assert not any(isinstance(e, TokenDelta) for e in again_events)  # the model did not run


def test_eviction_and_reload_under_memory_pressure(ex):
    big_a = ModelRef("big-a", "embed", "tiny", "bert", expected_mib=40)
    big_b = ModelRef("big-b", "embed", "tiny", "bert", expected_mib=40)
    load(ex, "big-a", big_a, "cpu:1")
    report = load(ex, "big-b", big_b, "cpu:1")
    assert "big-a" in report.evicted
    events = wait_for(
        ex,
        lambda seen: any(isinstance(e, ReplicaEvicted) and e.replica_id == "big-a" for e in seen),
        5,
    )
    evicted = next(e for e in events if isinstance(e, ReplicaEvicted) and e.replica_id == "big-a")
    assert "LRU" in evicted.reason and evicted.freed_mib == 40
    ex.submit(Batch("ev1", "big-a", (one("ev-1", "e1", {"text": "x"}),)))
    gone = completions(wait_for(ex, all_done(["ev-1"])))["ev-1"]
    assert not gone.ok and gone.retriable and "not loaded" in gone.error
    assert gone.cause == "unavailable"
    again = load(ex, "big-a", big_a, "cpu:1")
    assert "big-b" in again.evicted
    ex.submit(Batch("ev2", "big-a", (one("ev-2", "e2", {"text": "x"}),)))
    assert completions(wait_for(ex, all_done(["ev-2"])))["ev-2"].ok
    too_big = ex.load(
        "huge", ModelRef("huge", "embed", "tiny", "bert", expected_mib=500), "cpu:1"
    ).result(10)
    assert not too_big.ok and "does not fit" in too_big.reason


def test_killed_worker_mid_batch_loses_nothing_and_restarts(ex):
    load(ex, "noop-k", NOOP, "cpu:1")
    items = tuple(one(f"k-{i}", f"n{i}", {"x": i}, run="run-k", busy_ms=3000) for i in range(3))
    pid = ex.worker_pid("cpu:1")
    ex.submit(Batch("kill", "noop-k", items))
    wait_for_busy(ex, "cpu:1")
    killed = clock.monotonic()
    os.kill(pid, signal.SIGKILL)
    events = wait_for(ex, lambda seen: any(isinstance(e, WorkerDown) for e in seen), 10)
    # a crash is seen within two heartbeat intervals (in fact at once: the pipe closes)
    assert clock.monotonic() - killed <= 2 * ex.config.heartbeat_s
    events += wait_for(ex, lambda seen: any(isinstance(e, WorkerUp) for e in seen), 90)
    results = completions(events)
    assert set(results) == {"k-0", "k-1", "k-2"}
    assert all(not r.ok and r.retriable and r.cause == "worker_down" for r in results.values())
    down = next(e for e in events if isinstance(e, WorkerDown))
    assert set(down.failed_items) == set(results) and "noop-k" in down.lost_replicas
    assert ex.worker_pid("cpu:1") != pid
    load(ex, "noop-k2", NOOP, "cpu:1")  # the restarted worker serves; same keys run once now
    ex.submit(
        Batch(
            "retry",
            "noop-k2",
            tuple(one(i.idempotency_key, i.step.node_id, {"x": 1}, run="run-k") for i in items),
        )
    )
    retried = completions(wait_for(ex, all_done(results)))
    assert all(r.ok and not r.replayed for r in retried.values())


def test_long_silent_batch_is_not_mistaken_for_a_hang(ex):
    """Five heartbeat intervals inside one step that never ticks: the heartbeat thread keeps
    the worker alive, and the batch is within its deadline, so nothing is killed."""
    load(ex, "noop-l", SILENT, "cpu:0")
    pid = ex.worker_pid("cpu:0")
    busy_ms = int(5 * ex.config.heartbeat_s * 1000)
    ex.submit(Batch("long", "noop-l", (one("l-1", "l", {}, run="run-l", busy_ms=busy_ms),)))
    events = wait_for(ex, all_done(["l-1"]), 30)
    assert completions(events)["l-1"].ok
    assert not any(isinstance(e, WorkerDown) for e in events)
    assert ex.worker_pid("cpu:0") == pid


def test_hung_batch_is_detected_at_its_deadline(ex):
    load(ex, "noop-h", SILENT, "cpu:0")
    ex.submit(Batch("hang", "noop-h", (one("h-1", "h", {}, run="run-h", busy_ms=60_000),)))
    wait_for_busy(ex, "cpu:0")
    started = clock.monotonic()
    status = next(s for s in ex.heartbeat() if s.device_id == "cpu:0")
    assert status.running_batches == ("hang",) and status.running_count == 1
    assert status.running[0].deadline_s == HANG_FLOOR_S
    events = wait_for(ex, lambda seen: any(isinstance(e, WorkerDown) for e in seen), 20)
    detected = clock.monotonic() - started
    down = next(e for e in events if isinstance(e, WorkerDown))
    assert "hung" in down.reason and down.failed_items == ("h-1",)
    assert completions(events)["h-1"].cause == "hang"
    # Heartbeats went on (their own thread): the deadline caught it, no earlier, and the reader
    # noticed within its polling tick (plus scheduling slack on a shared machine).
    assert HANG_FLOOR_S - 0.3 <= detected <= HANG_FLOOR_S + 2 * ex.config.heartbeat_s + 0.5
    wait_for(ex, lambda seen: any(isinstance(e, WorkerUp) for e in seen), 90)


def test_cancel_takes_out_queued_items_only(ex):
    load(ex, "noop-c", NOOP, "cpu:1")
    running = one("c-run", "c0", {"x": 0}, run="run-c", busy_ms=1500)
    ex.submit(Batch("c-first", "noop-c", (running,)))
    queued = tuple(one(f"c-{i}", f"c{i}", {"x": i}, run="run-c") for i in range(1, 4))
    ex.submit(Batch("c-second", "noop-c", queued))
    wait_for_busy(ex, "cpu:1")
    # The pipe keeps order: "c-second" reached the worker's inbox before this cancel, and
    # it cannot start while "c-first" holds the main thread for 1.5 s.
    ex.cancel(["c-1", "c-3", "c-run", "never-submitted"])
    results = completions(wait_for(ex, all_done(["c-run", "c-1", "c-2", "c-3"]), 30))
    assert results["c-run"].ok and results["c-2"].ok  # running: not touched; not asked: runs
    for key in ("c-1", "c-3"):
        r = results[key]
        assert not r.ok and r.cause == "cancelled" and not r.retriable, r
    # A cancel is not remembered as a final outcome: the same key submitted again runs.
    ex.submit(Batch("c-again", "noop-c", (queued[0],)))
    again = completions(wait_for(ex, all_done(["c-1"])))["c-1"]
    assert again.ok and not again.replayed


def test_breaker_opens_after_repeated_batch_failures(ex):
    load(ex, "noop-broken", BROKEN, "cpu:1")
    for i in range(2):
        ex.submit(Batch(f"f{i}", "noop-broken", (one(f"f-{i}", f"f{i}", {"x": i}, run="run-f"),)))
        failed = completions(wait_for(ex, all_done([f"f-{i}"])))[f"f-{i}"]
        assert not failed.ok and failed.retriable and failed.cause == "model_error"
    assert ex.breaker_state("noop-broken") == "open"
    ex.submit(Batch("f9", "noop-broken", (one("f-9", "f9", {"x": 9}, run="run-f"),)))
    refused = completions(wait_for(ex, all_done(["f-9"])))["f-9"]
    assert not refused.ok and "circuit open" in refused.error and refused.cause == "unavailable"


def test_a_cancelled_probe_lets_the_next_batch_probe(ex):
    """A half-open breaker's probe batch cancelled before it ran says nothing of the replica,
    but it is over: the next batch is the probe. Before, the breaker kept waiting for the
    cancelled probe and refused every batch of the replica from then on."""
    load(ex, "noop-hold", NOOP, "cpu:1")
    load(ex, "noop-p", NOOP, "cpu:1")
    ex.submit(
        Batch("p-hold", "noop-hold", (one("p-h", "ph", {"x": 0}, run="run-p", busy_ms=1500),))
    )
    wait_for_busy(ex, "cpu:1")
    with ex._lock:  # its cooldown long over: the next batch goes as the probe
        breaker = ex._breakers.of("noop-p")
        breaker.state, breaker.failures, breaker.opened_at = "open", 2, -1e9
    ex.submit(Batch("p-first", "noop-p", (one("p-1", "p1", {"x": 1}, run="run-p"),)))
    ex.cancel(["p-1"])  # still behind "p-hold" in the worker's inbox: taken out
    first = completions(wait_for(ex, all_done(["p-1"])))["p-1"]
    assert first.cause == "cancelled"
    ex.submit(Batch("p-second", "noop-p", (one("p-2", "p2", {"x": 2}, run="run-p"),)))
    second = completions(wait_for(ex, all_done(["p-2"]), 30))["p-2"]
    assert second.ok, second.error
    assert ex.breaker_state("noop-p") == "closed"


def test_inputs_too_long_for_the_model_fail_as_bad_input_and_never_open_the_breaker(ex):
    """Issue 22: a prompt beyond the model's context used to raise in the forward pass (a
    model_error, retriable) and two of them opened the replica's breaker for every tenant."""
    load(ex, "gen-b", GPT2, "cpu:1")
    too_long = "word " * 700  # beyond the tiny GPT-2's 512 positions
    for i in range(3):  # alone in its batch (twice: the breaker's threshold), then with another
        items = [one(f"t-{i}", f"t{i}", {"prompt": too_long}, run="run-t", max_tokens=2)]
        if i == 2:
            items.append(one("ok-2", "ok2", {"prompt": "fine"}, run="run-t", max_tokens=2))
        ex.submit(Batch(f"t{i}", "gen-b", tuple(items)))
        done = completions(wait_for(ex, all_done(it.idempotency_key for it in items)))
        bad = done[f"t-{i}"]
        assert not bad.ok and not bad.retriable and bad.cause == "bad_input", bad
        assert bad.field == "prompt" and "at most 512" in bad.error
    assert done["ok-2"].ok and done["ok-2"].output_tokens >= 1
    assert ex.breaker_state("gen-b") == "closed"


async def test_events_async_iterator_delivers_completions(ex):
    import asyncio

    load(ex, "noop-a", NOOP, "cpu:0")
    stream = ex.events()
    waiter = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)  # the listener is registered once the generator starts
    ex.submit(Batch("a1", "noop-a", (one("a-1", "a", {"x": 1}, run="run-a"),)))
    event = await asyncio.wait_for(waiter, 10)
    while not (hasattr(event, "result") and event.result.idempotency_key == "a-1"):
        event = await asyncio.wait_for(anext(stream), 10)
    assert event.result.ok
    await stream.aclose()


def test_a_stopped_worker_ends_cleanly_after_loading_a_model(model_cache, caplog):
    """A worker told to stop ends with exit code 0 even with a model loaded. Its helper threads
    used to be left running into interpreter shutdown, which aborted the process (SIGABRT,
    "terminate called without an active exception") on every stop after a load."""
    executor = make_executor(model_cache, cpu_slots=1)
    try:
        load(executor, "r-bert", BERT, "cpu:0")
        process = executor._workers["cpu:0"].process
    finally:
        executor.stop()
    assert process.exitcode == 0
    assert "after stop" not in caplog.text
