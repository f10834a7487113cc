"""Preemption cancels on the executor, and failure causes steer completions (pure: a fake
executor records what the actuator asks; no workers)."""

from __future__ import annotations

import asyncio

import pytest

from control.core.actions import BatchItem as CoreItem
from control.core.actions import Dispatch, InputBinding, Preempt, RunFinished
from control.core.tenancy.cost import CostModel
from control.core.types import InputRef, Request
from control.executor.protocol import ItemCompleted, ItemResult, StepKey, WorkerDown
from control.runtime.actuator import Actuator
from control.runtime.completions import Completions
from control.runtime.metrics import RuntimeMetrics
from control.runtime.state import Complete, Ingest, PendingBatch, RunState
from control.runtime.types import RunHandle


class RecordingExecutor:
    """Only what the actuator's preempt path touches: remembers every cancel."""

    def __init__(self) -> None:
        self.cancelled: list[list[str]] = []

    def cancel(self, keys) -> None:  # noqa: ANN001
        self.cancelled.append(sorted(keys))

    def release_run(self, run_id: str) -> None:  # a finished run's outputs are dropped
        self.cancelled.append([f"release {run_id}"])


def core_item(run: str, node: str) -> CoreItem:
    binding = InputBinding("text", (InputRef(run, "input", "text", None, None),))
    return CoreItem(f"{run}/{node}/1", run, node, 1, None, f"{run}/{node}", "embed", (binding,),
                    4, 0)  # fmt: skip


def world(items: list[CoreItem]) -> tuple[Actuator, Completions, RecordingExecutor, list]:
    records: list = []
    done = Completions({}, CostModel(), RuntimeMetrics(), None, lambda d: None, lambda d: [])
    ex = RecordingExecutor()
    act = Actuator(ex, done, {}, {}, {}, RuntimeMetrics(), records.append)  # type: ignore[arg-type]
    d = Dispatch("b1", "rep", "m:1", None, ("cpu:0",), tuple(items), 8, 1000, "test")
    done.expect(PendingBatch(d, {i.idempotency_key: i for i in items}, 0.0, "cpu:0", "rep"))
    return act, done, ex, records


def result(item: CoreItem, ok: bool, cause: str | None, retriable: bool = True) -> ItemResult:
    step = StepKey(item.request_id, item.node_id, item.attempt)
    return ItemResult(step, item.idempotency_key, "rep", "cpu:0", ok, None if ok else "x",
                      retriable and not ok, cause=cause)  # fmt: skip


def test_preempt_cancels_only_the_named_steps_still_in_flight():
    a, b, c = core_item("r1", "a"), core_item("r1", "b"), core_item("r2", "c")
    act, done, ex, _ = world([a, b, c])
    done.on_event(ItemCompleted(result(a, True, None)), 1.0)  # a already came back
    act.apply([Preempt("r1", (a.key, b.key), "reclaimed by its owner")], 2.0)
    assert ex.cancelled == [[b.idempotency_key]]  # not a (done), not c (not named)


@pytest.mark.parametrize(
    ("cause", "held_until_worker_down"),
    [("worker_down", True), ("hang", True), ("cancelled", False), ("model_error", False)],
)
def test_failures_lost_with_a_worker_wait_for_its_worker_down(cause, held_until_worker_down):
    a = core_item("r1", "a")
    _, done, _, _ = world([a])
    retriable = cause != "cancelled"
    first = done.on_event(ItemCompleted(result(a, False, cause, retriable)), 1.0)
    assert (first == []) is held_until_worker_down
    after = done.on_event(WorkerDown("cpu:0", "gone", ("rep",), (a.idempotency_key,)), 2.0)
    records = first + after
    assert isinstance(after[0], Ingest)  # the device goes down first in the same instant
    completes = [r for r in records if isinstance(r, Complete)]
    assert len(completes) == 1 and not completes[0].result.items[0].ok


def test_a_cancelled_runs_step_that_finishes_later_is_not_billed():
    """Work done before the cancel is billed; a step still running at the cancel comes back
    later, and its result is discarded unbilled (the run is no longer held)."""
    a, b = core_item("r1", "a"), core_item("r1", "b")
    billed: list = []
    loop = asyncio.new_event_loop()
    try:
        handle = RunHandle("r1", loop)
        runs = {"r1": RunState(handle, Request("r1", "t1", "wf"), {"a": "embed", "b": "embed"},
                               {"a": "m:1", "b": "m:1"}, 0.0)}  # fmt: skip
        done = Completions(runs, CostModel(), RuntimeMetrics(), billed.append, lambda d: None,
                           lambda d: [])  # fmt: skip
        ex = RecordingExecutor()
        act = Actuator(ex, done, runs, {}, {}, RuntimeMetrics(), lambda r: None)  # type: ignore[arg-type]
        d = Dispatch("b1", "rep", "m:1", None, ("cpu:0",), (a, b), 8, 1000, "test")
        done.expect(PendingBatch(d, {i.idempotency_key: i for i in (a, b)}, 0.0, "cpu:0", "rep"))
        done.on_event(ItemCompleted(result(a, True, None)), 1.0)  # finished before the cancel
        act.apply([Preempt("r1", (b.key,), "cancelled"),
                   RunFinished("r1", "cancelled", {}, "cancelled", "cancelled")], 2.0)  # fmt: skip
        assert [b.idempotency_key] in ex.cancelled and handle.done
        done.on_event(ItemCompleted(result(b, True, None)), 3.0)  # it had started: late result
        assert [u.node_id for u in billed] == ["a"]
    finally:
        loop.close()
