"""The runtime's memory of billed step keys is a bounded window (issue 22: ``Completions.billed``
grew for the life of the process), and still bills each key once: a second successful
completion of a key inside the window is not billed again, and a key of a run still active is
kept however long the run takes."""

from __future__ import annotations

import asyncio

from control.core.actions import BatchItem as CoreItem
from control.core.actions import Dispatch
from control.core.tenancy.cost import CostModel
from control.core.types import Request
from control.executor.protocol import ItemCompleted, ItemResult, StepKey
from control.runtime.completions import Completions
from control.runtime.metrics import RuntimeMetrics
from control.runtime.state import PendingBatch, RunState
from control.runtime.types import RunHandle, UsageRecord


def _completions(runs: dict, window_s: float = 60.0) -> tuple[Completions, list[UsageRecord]]:
    bills: list[UsageRecord] = []
    done = Completions(runs, CostModel(), RuntimeMetrics(), bills.append, lambda d: None,
                       lambda d: [], billed_window_s=window_s)  # fmt: skip
    return done, bills


def _expect(done: Completions, batch_id: str, run_id: str, key: str, now: float) -> None:
    item = CoreItem(f"{run_id}/n/1", run_id, "n", 1, None, key, "embed", (), 4, 0)
    d = Dispatch(batch_id, "r0", "m:1", None, ("cpu:0",), (item,), 4, 1, "test")
    done.expect(PendingBatch(d, {key: item}, now, "cpu:0", "r0"))


def _ok(run_id: str, key: str) -> ItemCompleted:
    return ItemCompleted(ItemResult(StepKey(run_id, "n"), key, "r0", "cpu:0", ok=True,
                                    input_tokens=4))  # fmt: skip


def test_a_key_completed_twice_inside_the_window_is_billed_once():
    loop = asyncio.new_event_loop()
    try:
        runs = {"run-1": RunState(RunHandle("run-1", loop), Request("run-1", "t1", "wf:1"),
                                  {}, {}, 0.0)}  # fmt: skip
        done, bills = _completions(runs)
        _expect(done, "b1", "run-1", "k1", 0.0)
        done.on_event(_ok("run-1", "k1"), 1.0)
        _expect(done, "b2", "run-1", "k1", 2.0)  # a retry of the step, run again (not replayed)
        done.on_event(_ok("run-1", "k1"), 30.0)
        assert [b.idempotency_key for b in bills] == ["k1"]
    finally:
        loop.close()


def test_the_billed_keys_are_bounded_by_the_window():
    done, _ = _completions({}, window_s=60.0)
    for i in range(10_000):  # ten keys a second for 1000 s, of runs already ended
        assert done.first_bill(f"k{i}", f"run-{i}", i / 10.0)
    assert len(done.billed) <= 640  # not 10,000: the window and one span (60 / 16 s)
    assert not done.first_bill("k9990", "run-9990", 1000.0)  # inside the window: caught


def test_a_key_of_a_run_still_active_outlives_the_window():
    runs: dict = {"long": object()}
    done, _ = _completions(runs, window_s=60.0)
    assert done.first_bill("long-step", "long", 0.0)
    for i in range(100):
        done.first_bill(f"k{i}", f"ended-{i}", 10.0 * i)
    assert not done.first_bill("long-step", "long", 1000.0)  # its run is active: still known
    del runs["long"]
    done.first_bill("later", "ended", 2000.0)  # its run ended: kept a window from now on
    assert "long-step" in done.billed
    done.first_bill("much-later", "ended", 2070.0)
    assert "long-step" not in done.billed and len(done.billed) == 1
