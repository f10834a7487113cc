"""Cancel through the core (issue 22, item 4): ``CancelRun`` ends a run ``cancelled`` at the
next step: its queued steps are dropped, its steps in flight are named in a ``Preempt`` for the
executor to cancel, a result that comes back for them later advances nothing, and the tenancy
half's hold is released. Cancelling again, or a run that is unknown or ended, changes nothing."""

from __future__ import annotations

from control.core.actions import Dispatch, Preempt, RunFinished
from control.core.events import CancelRun
from control.core.types import BatchResult, Request, StepResult
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, LLM, RAG, RERANK, devices, make_core

REPLICAS = [(EMBED.key, "d000"), (RERANK.key, "d001"), (LLM.key, "d002")]


def _core(tenancy: FcfsTenancy):  # noqa: ANN202
    return make_core(tenancy, devs=devices(3), replicas=REPLICAS, workflows=[RAG])


def _first_dispatch(core, rid: str, now: float) -> tuple[Dispatch, float]:  # noqa: ANN001
    core.submit(Request(rid, "t1", "rag", prompt_tokens=8), now)
    for i in range(200):
        at = now + i * 0.005
        found = core.step(at).of_type(Dispatch)
        if found:
            return found[0], at
    raise AssertionError("nothing dispatched")


def test_cancel_mid_step_preempts_it_discards_its_result_and_releases_the_hold() -> None:
    tenancy = FcfsTenancy()
    core = _core(tenancy)
    d, at = _first_dispatch(core, "q1", 0.0)
    assert d.items[0].node_id == "embed"
    core.ingest(CancelRun("q1", "cancelled by tenant t1"), at)
    plan = core.step(at + 0.001)
    (pre,) = plan.of_type(Preempt)
    assert pre.request_id == "q1" and pre.cancel_keys == (d.items[0].key,)
    (fin,) = plan.of_type(RunFinished)
    assert fin.status == "cancelled" and fin.reason == "cancelled by tenant t1"
    assert fin.outputs == {}
    assert "q1" in tenancy.released
    # the running step still comes back (it had started): it is discarded, nothing follows it
    ok = StepResult(d.items[0].key, ok=True)
    core.complete(BatchResult(d.batch_id, 10, (ok,)), at + 0.01)
    later = [core.step(at + 0.01 + i * 0.005) for i in range(50)]
    assert not any(p.of_type(Dispatch) for p in later)  # search/rerank/llm never dispatched
    assert not any(p.of_type(RunFinished) for p in later)  # ended once


def test_cancel_is_idempotent_and_ignores_unknown_or_ended_runs() -> None:
    tenancy = FcfsTenancy()
    core = _core(tenancy)
    _, at = _first_dispatch(core, "q1", 0.0)
    core.ingest(CancelRun("q1"), at)
    core.ingest(CancelRun("q1"), at)
    core.ingest(CancelRun("nobody"), at)
    plan = core.step(at + 0.001)
    assert len(plan.of_type(RunFinished)) == 1 and tenancy.released.count("q1") == 1
    core.ingest(CancelRun("q1"), at + 0.002)
    assert not core.step(at + 0.003).of_type(RunFinished)


def test_a_run_cancelled_before_admission_ends_cancelled_without_dispatch() -> None:
    tenancy = FcfsTenancy()
    core = _core(tenancy)
    core.submit(Request("q2", "t1", "rag", prompt_tokens=8), 0.0)
    core.ingest(CancelRun("q2"), 0.0)  # same instant: admitted, then cancelled, in one step
    plan = core.step(0.0)
    (fin,) = plan.of_type(RunFinished)
    assert fin.status == "cancelled" and not plan.of_type(Dispatch)
    assert "q2" in tenancy.released
    assert not any(core.step(0.005 * i).of_type(Dispatch) for i in range(1, 20))
