"""Continuous batching in the worker: batches taken from the inbox into a running decode loop.

The worker runs in this process (no pipe, no threads): its ``conn`` records what it sends, and
batches "arrive" by being put in its inbox, sometimes from inside the loop (when the running
batch streams its n-th delta), as the receiver thread would.
"""

from __future__ import annotations

import pickle

import pytest
import torch

from control.executor.adapters import generate_join
from control.executor.adapters.base import ItemOutput
from control.executor.adapters.generate import GenerateAdapter
from control.executor.adapters.tools import NoopAdapter
from control.executor.protocol import Batch, BatchItem, DeviceInfo, GenParams, InputRef, StepKey
from control.executor.worker.main import WorkerConfig
from control.executor.worker.process import Worker
from tests.executor.test_adapters import RecordingCtx
from tests.executor.test_adapters import item as prepared_item
from tests.support.clock import ManualClock

CPU = torch.device("cpu")


class Conn:
    """Records what the worker sends; ``hook(msg)`` runs after each send."""

    def __init__(self) -> None:
        self.sent: list[tuple] = []
        self.hook = lambda msg: None

    def send_bytes(self, data: bytes) -> None:  # the worker sends pickled frames
        msg = pickle.loads(data)
        self.sent.append(msg)
        self.hook(msg)

    def kinds(self) -> list[tuple[str, str]]:
        return [(m[0], m[1]) for m in self.sent if m[0] in ("started", "results", "cancelled")]

    def results(self, batch_id: str) -> list:
        found = [m[2] for m in self.sent if m[0] == "results" and m[1] == batch_id]
        assert len(found) == 1, f"{batch_id} reported {len(found)} times"
        return found[0]


@pytest.fixture
def worker(model_cache):
    conn = Conn()
    w = Worker(DeviceInfo("cpu:0", "cpu", 0, 1024), conn, WorkerConfig())
    w.adapters["gen"] = GenerateAdapter(model_cache / "tiny" / "gpt2", CPU, {})
    w.adapters["noop"] = NoopAdapter(tick=False)
    return w


def gen_batch(batch_id: str, prompt: str, replica: str = "gen", **params) -> Batch:
    items = (BatchItem(StepKey(batch_id, "n"), f"{batch_id}-k", {"prompt": prompt},
                       GenParams(**params)),)  # fmt: skip
    return Batch(batch_id, replica, items)


def arrive_at_delta(worker, key: str, n: int, *msgs: tuple) -> None:
    """Put ``msgs`` in the inbox when the item ``key`` streams its n-th delta."""
    count = {"deltas": 0}

    def hook(msg):
        if msg[0] == "delta" and msg[1] == key:
            count["deltas"] += 1
            if count["deltas"] == n:
                for m in msgs:
                    worker.inbox.put(m)

    worker.conn.hook = hook


def alone_text(model_cache, prompt: str, **params) -> str:
    adapter = GenerateAdapter(model_cache / "tiny" / "gpt2", CPU, {})
    return adapter.run([prepared_item("x", {"prompt": prompt}, **params)], RecordingCtx())[0].value[
        "text"
    ]


def test_a_batch_arriving_mid_decode_joins_and_reports_first(worker, model_cache):
    a = gen_batch("A", "the quick brown fox", max_tokens=30, stream=True)
    b = gen_batch("B", "Paris", max_tokens=3, temperature=0.8, seed=4)
    arrive_at_delta(worker, "A-k", 5, ("batch", b, {}))
    worker.on_batch(a, {})
    assert worker.conn.kinds() == [("started", "A"), ("started", "B"), ("results", "B"),
                                   ("results", "A")]  # fmt: skip
    ra, rb = worker.conn.results("A")[0], worker.conn.results("B")[0]
    assert ra.ok and rb.ok and rb.output_tokens == 3 and rb.batch_size == 1
    assert worker.outputs.get("B", "n")["text"] == alone_text(
        model_cache, "Paris", max_tokens=3, temperature=0.8, seed=4
    )
    assert worker.outputs.get("A", "n")["text"] == alone_text(
        model_cache, "the quick brown fox", max_tokens=30
    )
    # B's clock started when it joined, after A's, and stopped before A's
    assert rb.first_token_ms <= rb.device_ms < ra.device_ms
    assert not worker.busy and worker.inbox.pop() is None


def test_only_a_batch_the_executor_did_not_time_is_announced(worker):
    """A batch sent to an idle worker (``announce`` False) runs without ``started``; one that
    joins its loop was sent behind it and announces its join."""
    a = gen_batch("A", "the quick brown fox", max_tokens=12, stream=True)
    b = gen_batch("B", "Paris", max_tokens=2)
    arrive_at_delta(worker, "A-k", 3, ("batch", b, {}, True))
    worker.on_batch(a, {}, False)
    assert worker.conn.kinds() == [("started", "B"), ("results", "B"), ("results", "A")]


def test_joining_stops_at_the_first_message_that_cannot_join(worker):
    """Fairness: the inbox is served in order. A batch for another replica (or any other
    message) at its head ends joining; what waits behind it, even for the running replica,
    waits its turn, and can still be cancelled."""
    a = gen_batch("A", "the quick brown fox", max_tokens=12, stream=True)
    b = gen_batch("B", "Paris", max_tokens=20)
    other = Batch("C", "noop", (BatchItem(StepKey("C", "n"), "C-k", {"x": 1}, GenParams()),))
    d = gen_batch("D", "hi", max_tokens=4)
    queued = [("batch", b, {}), ("batch", other, {}), ("batch", d, {}), ("release", "run-x")]
    arrive_at_delta(worker, "A-k", 2, *queued)
    worker.on_batch(a, {})
    assert worker.conn.kinds() == [("started", "A"), ("started", "B"), ("results", "A"),
                                   ("results", "B")]  # fmt: skip
    worker._cancel(["D-k"])
    assert worker.conn.sent[-1][:2] == ("cancelled", "D")
    assert worker.inbox.pop() == ("batch", other, {})
    assert worker.inbox.pop() == ("release", "run-x")
    assert worker.inbox.pop() is None


def test_a_running_loop_of_another_replica_takes_nothing(worker):
    first = Batch("N", "noop", (BatchItem(StepKey("N", "n"), "N-k", {"x": 1}, GenParams()),))
    waiting = gen_batch("G", "hi", max_tokens=2)
    worker.inbox.put(("batch", waiting, {}))
    worker.on_batch(first, {})  # noop runs one batch at a time: nothing joins it
    assert worker.conn.kinds() == [("started", "N"), ("results", "N")]
    assert worker.inbox.pop() == ("batch", waiting, {})


def test_a_joiner_without_runnable_items_is_reported_at_once(worker):
    a = gen_batch("A", "the quick brown fox", max_tokens=10, stream=True)
    ref = InputRef("gone", "n", "text")
    lost = Batch("L", "gen", (BatchItem(StepKey("L", "n"), "L-k", {"prompt": ref}, GenParams()),))
    arrive_at_delta(worker, "A-k", 2, ("batch", lost, {}))
    worker.on_batch(a, {})
    assert worker.conn.kinds() == [("started", "A"), ("started", "L"), ("results", "L"),
                                   ("results", "A")]  # fmt: skip
    failed = worker.conn.results("L")[0]
    assert not failed.ok and failed.cause == "unavailable" and failed.retriable


def test_an_error_in_the_loop_fails_every_batch_not_yet_reported(worker, monkeypatch):
    calls = {"n": 0}
    original = generate_join.DecodeLoop.step

    def failing_step(loop):
        calls["n"] += 1
        if calls["n"] == 8:
            raise RuntimeError("device fell over")
        original(loop)

    monkeypatch.setattr(generate_join.DecodeLoop, "step", failing_step)
    a = gen_batch("A", "the quick brown fox", max_tokens=30, stream=True)
    quick = gen_batch("B", "Paris", max_tokens=2)  # done one step after it joins
    slow = gen_batch("C", "hi", max_tokens=20)
    arrive_at_delta(worker, "A-k", 2, ("batch", quick, {}))
    first_hook = worker.conn.hook

    def hook(msg):
        first_hook(msg)
        if msg[:2] == ("results", "B"):
            worker.inbox.put(("batch", slow, {}))

    worker.conn.hook = hook
    worker.on_batch(a, {})
    assert worker.conn.results("B")[0].ok
    for batch_id in ("A", "C"):
        r = worker.conn.results(batch_id)[0]
        assert not r.ok and r.cause == "model_error" and r.retriable and "fell over" in r.error
    assert not worker.busy


def test_the_worker_times_a_batch_with_the_clock_it_is_given():
    clock = ManualClock()

    class Timed:
        """An adapter whose batch takes exactly 42 ms of the test's clock."""

        task = "noop"

        def run(self, items, ctx):  # noqa: ANN001
            clock.advance(0.042)
            return [ItemOutput(value={"x": 1}) for _ in items]

        def memory_mib(self) -> int:
            return 0

    conn = Conn()
    w = Worker(DeviceInfo("cpu:0", "cpu", 0, 1024), conn, WorkerConfig(), clock=clock)
    w.adapters["timed"] = Timed()
    item = BatchItem(StepKey("T", "n"), "T-k", {}, GenParams())
    w.on_batch(Batch("T", "timed", (item,)), {})
    (result,) = conn.results("T")
    assert result.ok and result.device_ms == pytest.approx(42.0)
