"""The bound on a run's life (issue 22, item 2: no run waits forever): a run whose request has
``expires_at`` ends ``timed_out`` at that instant if it is still going, with a reason naming
the bound and what it waited for; the tenancy half's hold is released, its queued steps leave,
and nothing follows. A run that ended before its bound is not touched by it. The service's
side: an async run (no caller timeout) gets ``async_run_timeout_s`` as its bound."""

from __future__ import annotations

from control.core.actions import Dispatch, RunFinished
from control.core.events import DeviceDown
from control.core.types import BatchResult, Request, StepResult
from control.services.inference import SYNC_BOUND_GRACE_S, _bounds
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, LLM, RAG, RERANK, devices, make_core, single

REPLICAS = [(EMBED.key, "d000"), (RERANK.key, "d001"), (LLM.key, "d002")]


def _core(tenancy: FcfsTenancy):  # noqa: ANN202
    return make_core(tenancy, devs=devices(3), replicas=REPLICAS, workflows=[RAG])


def test_a_run_waiting_for_a_device_that_never_comes_ends_timed_out_at_its_bound() -> None:
    tenancy = FcfsTenancy()
    core = _core(tenancy)
    for d in ("d000", "d001", "d002"):
        core.ingest(DeviceDown(d, "worker died"), 0.0)
    core.step(0.0)
    core.submit(Request("q1", "t1", "rag", prompt_tokens=8, expires_at=5.0), 0.1)
    plan = core.step(0.1)
    assert not plan.of_type(RunFinished) and not plan.of_type(Dispatch)
    assert core.next_wakeup(0.1) == 5.0  # the bound is a wake-up: no new input is needed
    assert not core.step(4.99).of_type(RunFinished)
    (fin,) = core.step(5.0).of_type(RunFinished)
    assert fin.status == "timed_out" and fin.outputs == {}
    assert fin.reason.startswith("timed out: the run did not finish within its bound of 4.9 s")
    assert "embed" in fin.reason and fin.error == fin.reason
    assert "q1" in tenancy.released
    assert core.snapshot().counters["runs.timed_out"] == 1
    assert not any(core.step(5.0 + i).of_type(RunFinished) for i in range(1, 5))  # ended once


def test_a_run_that_finished_before_its_bound_is_left_alone() -> None:
    tenancy = FcfsTenancy()
    wf = single(EMBED)
    core = make_core(tenancy, devs=devices(1), replicas=[(EMBED.key, "d000")], workflows=[wf])
    core.submit(Request("q2", "t1", wf["workflow"], prompt_tokens=8, expires_at=2.0), 0.0)
    d = None
    for i in range(200):
        found = core.step(i * 0.005).of_type(Dispatch)
        if found:
            d, at = found[0], i * 0.005
            break
    assert d is not None
    core.complete(BatchResult(d.batch_id, 10, (StepResult(d.items[0].key, ok=True),)), at)
    (fin,) = core.step(at).of_type(RunFinished)
    assert fin.status == "succeeded"
    assert not core.step(2.0).of_type(RunFinished)
    assert core.next_wakeup(at) is None or core.next_wakeup(at) != 2.0  # stale: dropped


class _Clock:
    def monotonic(self) -> float:
        return 100.0


class _Runtime:
    clock = _Clock()


def test_async_runs_get_the_setting_as_bound_and_sync_runs_their_timeout_plus_grace() -> None:
    assert _bounds(_Runtime(), None, 600.0) == (700.0, 700.0)
    assert _bounds(_Runtime(), 30.0, 600.0) == (130.0, 130.0 + SYNC_BOUND_GRACE_S)
    assert _bounds(object(), None, 600.0) == (None, None)  # a double without a clock
