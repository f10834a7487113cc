"""ControlCore end to end: loads, preloads, tenancy calls, rejections, preemption, timeouts."""

from __future__ import annotations

import pytest

from control.core.actions import (
    Dispatch,
    LoadModel,
    MoveStep,
    Preempt,
    Reject,
    RunFinished,
    StepRetried,
)
from control.core.batching.size_delay import SizeDelayConfig
from control.core.binding_config import BindingConfig
from control.core.context import CoreConfig
from control.core.dag.reissue import billing_key
from control.core.dag.spec import dag_from_dict
from control.core.errors import (
    DuplicateRequestError,
    InvalidWorkflowError,
    UnknownBatchError,
    UnknownWorkflowError,
)
from control.core.events import DeviceDown, ReplicaLoaded, TenancyConfigChanged, WorkflowRegistered
from control.core.routing.predicted_completion import PredictedCompletionConfig
from control.core.tenancy.base import HeadroomSpec, ReclaimOrder, TenancyConfig
from control.core.types import BatchResult, Request, StepResult
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, LLM, RAG, devices, latency, make_core, single
from tests.support.replay import Arrival, ReplayDriver, SimExecutor

DEVS = devices(4, 2)
TYPES = {d.device_id: d.accelerator for d in DEVS}


def req(i: int | str, wf: str = "only-minilm", **kw) -> Request:  # noqa: ANN003
    return Request(f"q{i}", kw.pop("tenant", "t1"), wf, prompt_tokens=kw.pop("tokens", 64), **kw)


def test_missing_model_is_loaded_on_the_cold_pool_and_work_waits() -> None:
    ten = FcfsTenancy()
    core = make_core(ten, devs=DEVS, workflows=[single(EMBED)])
    core.submit(req(1), 0.0)
    plan = core.step(0.0)
    (load,) = plan.of_type(LoadModel)
    assert load.pool == "cold" and not load.speculative and load.device_ids[0] in {"d004", "d005"}
    assert not plan.of_type(Dispatch) and not plan.of_type(RunFinished)
    (queued,) = core.snapshot().queues[load.replica_id]
    assert "to load on" in queued.why and "fcfs: q1 has no tenancy limits" in queued.why
    core.ingest(ReplicaLoaded(load.replica_id), 0.4)
    (d,) = core.step(0.4).of_type(Dispatch)  # waited past max delay: goes at once
    assert d.replica_id == load.replica_id and d.items[0].key == "q1/n/1"


def test_speculative_preload_for_later_nodes_and_hit_rate() -> None:
    core = make_core(FcfsTenancy(), devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[RAG])
    arrivals = [
        Arrival(0.0, req(1, "rag", max_output_tokens=4)),
        Arrival(0.001, req(2, "rag", max_output_tokens=4)),
    ]
    log = ReplayDriver(core, SimExecutor(latency(), TYPES)).run(arrivals)
    loads = [a for t, a in log if isinstance(a, LoadModel)]
    assert sorted(a.model_key for a in loads) == ["rerank:1", "smollm2:1"]
    assert all(a.speculative and a.pool == "cold" and "will need" in a.reason for a in loads)
    assert {t for t, a in log if isinstance(a, LoadModel)} == {0.0}
    finished = [a for _, a in log if isinstance(a, RunFinished)]
    assert [f.status for f in finished] == ["succeeded", "succeeded"]
    snap = core.snapshot()
    assert (snap.preload.issued, snap.preload.hits, snap.preload.hit_rate_milli) == (2, 2, 1000)


def test_tenancy_is_called_at_the_contract_points() -> None:
    ten = FcfsTenancy()
    core = make_core(ten, devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[single(EMBED)])
    ReplayDriver(core, SimExecutor(latency(), TYPES)).run([Arrival(0.0, req(1))])
    names = [c[0] for c in ten.calls]
    assert names == ["admit", "on_enqueue", "release"]
    # dispatched with its key (the tenancy half takes it off its books), never dequeued
    assert ten.charged["t1"] > 0 and ten.charged_keys == ["q1/n/1"] and ten.queued == set()


def test_rejection_carries_reason_and_is_not_released() -> None:
    ten = FcfsTenancy(refuse={"q1"})
    core = make_core(ten, devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[single(EMBED)])
    core.submit(req(1), 0.0)
    (rej,) = core.step(0.0).of_type(Reject)
    assert rej.reason == "test refuses q1" and rej.retry_after_s == 1.5
    assert ten.released == []


def test_reclaim_preempts_a_queued_run_once() -> None:
    ten = FcfsTenancy()
    core = make_core(ten, devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[single(EMBED)])
    core.submit(req(1), 0.0)
    core.step(0.0)
    ten.pending_reclaims = [ReclaimOrder("q1", "owner t2 reclaims its quota")]
    plan = core.step(0.001)
    (pre,) = plan.of_type(Preempt)
    (fin,) = plan.of_type(RunFinished)
    assert pre.reason == "owner t2 reclaims its quota" and pre.cancel_keys == ()
    assert fin.status == "preempted" and ("on_dequeue", "q1/n/1") in ten.calls
    ten.pending_reclaims = [ReclaimOrder("q1", "again")]
    assert not core.step(0.002).actions
    assert core.next_wakeup(0.002) is None


def test_a_timeout_retries_at_once_on_the_other_replica_under_a_fresh_key() -> None:
    """``timeout_s`` bounds the node's latency: the retry is dispatched in the same step, on
    the other replica, under a key the executor has not seen (under the node's own key it
    would wait for the hung original); the late original result is ignored."""
    wf = single(LLM)
    wf["nodes"][0].update(timeout_s=0.5, retries=1)
    core = make_core(
        FcfsTenancy(),
        devs=DEVS,
        replicas=[("smollm2:1", "d000"), ("smollm2:1", "d001")],
        workflows=[wf],
    )
    core.submit(req(1, "only-smollm2", max_output_tokens=4), 0.0)
    core.step(0.0)
    (d,) = core.step(0.005).of_type(Dispatch)
    assert core.next_wakeup(0.005) == pytest.approx(0.505)
    plan = core.step(0.505)
    (retry,) = plan.of_type(StepRetried)
    assert retry.failed_key == "q1/n/1" and retry.new_key == "q1/n/2"
    assert retry.cause == "timeout" and "timed out after 0.5 s" in retry.reason
    original = d.items[0].idempotency_key
    assert retry.idempotency_key == f"{original}~f2"
    assert billing_key(retry.idempotency_key) == original  # one bill for both attempts
    # after the batching delay only (as the first attempt), elsewhere: the original's replica
    # is presumed busy for another timeout
    wake = core.next_wakeup(0.505)
    assert wake is not None and wake <= 0.505 + 0.006
    (again,) = core.step(wake).of_type(Dispatch)
    assert again.items[0].key == "q1/n/2" and again.replica_id != d.replica_id
    assert again.items[0].idempotency_key == retry.idempotency_key
    core.complete(BatchResult(d.batch_id, 600_000, (StepResult("q1/n/1"),)), 0.6)
    assert not core.step(0.6).of_type(RunFinished)  # late result of the timed-out attempt
    core.complete(BatchResult(again.batch_id, 100_000, (StepResult("q1/n/2"),)), 0.61)
    (fin,) = core.step(0.61).of_type(RunFinished)
    assert fin.status == "succeeded"


def test_a_timeout_with_no_retries_left_fails_the_run_at_its_bound() -> None:
    wf = single(LLM)
    wf["nodes"][0].update(timeout_s=0.5, retries=0)
    core = make_core(FcfsTenancy(), devs=DEVS, replicas=[("smollm2:1", "d000")], workflows=[wf])
    core.submit(req(1, "only-smollm2", max_output_tokens=4), 0.0)
    core.step(0.0)
    core.step(0.005)
    (fin,) = core.step(0.505).of_type(RunFinished)
    assert fin.status == "failed" and "timed out after 0.5 s on" in (fin.error or "")


def test_device_down_retries_in_flight_work_elsewhere() -> None:
    wf = single(EMBED)
    wf["nodes"][0]["retries"] = 1
    core = make_core(FcfsTenancy(), devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[wf])
    core.submit(req(1), 0.0)
    core.step(0.0)
    (d,) = core.step(0.005).of_type(Dispatch)
    core.ingest(DeviceDown("d000", "xid 79"), 0.006)
    plan = core.step(0.006)
    assert plan.of_type(StepRetried) and plan.of_type(LoadModel)[0].pool == "cold"
    core.complete(BatchResult(d.batch_id, 1, (StepResult("q1/n/1"),)), 0.007)  # late: ignored
    with pytest.raises(UnknownBatchError, match="'nope'"):
        core.complete(BatchResult("nope", 1, ()), 0.007)


def test_devices_up_counts_what_the_snapshot_would_show() -> None:
    core = make_core(FcfsTenancy(), devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[])
    before = core.devices_up()
    assert before == sum(1 for d in core.snapshot().devices if d.up) and before >= 1
    core.ingest(DeviceDown("d000", "xid 79"), 0.001)
    core.step(0.001)
    assert core.devices_up() == before - 1
    assert core.devices_up() == sum(1 for d in core.snapshot().devices if d.up)


def test_tool_steps_run_on_the_host_and_headroom_is_checked() -> None:
    ten = FcfsTenancy(deny_devices={"d000"})
    core = make_core(ten, devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[RAG])
    core.ingest(
        TenancyConfigChanged(
            TenancyConfig(
                headroom=(
                    HeadroomSpec("h", frozenset({"d000"}), 150, frozenset({"critical"}), False),
                )
            )
        ),
        0.0,
    )
    core.submit(req(1, "rag"), 0.0)
    core.step(0.0)
    assert not core.step(0.01).of_type(Dispatch)  # refused by headroom on the reserved device
    assert ("headroom_check", "d000") in ten.calls
    ten.deny_devices.clear()
    core.ingest(ReplicaLoaded("extra", "minilm:1", ("d001",)), 0.02)
    (d,) = core.step(0.02).of_type(Dispatch)
    res = BatchResult(d.batch_id, 1000, (StepResult(d.items[0].key),))
    core.complete(res, 0.03)
    (tool,) = core.step(0.03).of_type(Dispatch)
    assert tool.tool == "vector_search" and tool.replica_id is None
    assert tool.items[0].inputs[0].refs[0].device_id == d.device_ids[0]


@pytest.mark.parametrize(("guard", "stays"), [(10**6, True), (0, False)])
def test_session_stays_on_its_replica_until_the_balance_guard(guard: int, stays: bool) -> None:
    cfg = CoreConfig(routing_config=PredictedCompletionConfig(balance_guard_us=guard))
    core = make_core(
        FcfsTenancy(),
        devs=DEVS,
        replicas=[("smollm2:1", "d000"), ("smollm2:1", "d001")],
        workflows=[single(LLM)],
        config=cfg,
    )
    blocks = (11, 12, 13)
    core.submit(req("a", "only-smollm2", session_id="s", prefix_blocks=blocks, tokens=1600), 0.0)
    core.step(0.0)
    core.submit(
        req("b", "only-smollm2", session_id="s", prefix_blocks=blocks + (14,), tokens=2100), 0.001
    )
    core.step(0.001)
    queues = core.snapshot().queues
    assert [v.key for v in queues["r0"]][0] == "qa/n/1"
    assert ("qb/n/1" in [v.key for v in queues["r0"]]) is stays
    if not stays:
        assert [v.key for v in queues["r1"]] == ["qb/n/1"]


def test_idle_replica_steals_backlog_of_its_model() -> None:
    # early binding: the backlog sits in r0's local queue, so a new replica must steal it
    cfg = CoreConfig(binding=BindingConfig(enabled=False))
    core = make_core(
        FcfsTenancy(), devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[single(EMBED)],
        config=cfg,
    )  # fmt: skip
    for i in range(20):
        core.submit(req(i), 0.0)
    core.step(0.0)  # 8 dispatched, 12 queued on r0
    core.ingest(ReplicaLoaded("late", "minilm:1", ("d001",)), 0.001)
    plan = core.step(0.001)
    moves = plan.of_type(MoveStep)
    assert moves and all(m.from_replica == "r0" and m.to_replica == "late" for m in moves)
    assert "saves" in moves[0].reason and len(moves) <= EMBED.max_batch_size
    assert any(d.replica_id == "late" for d in plan.of_type(Dispatch))


def test_late_binding_keeps_backlog_unbound_until_a_replica_is_free() -> None:
    core = make_core(
        FcfsTenancy(), devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[single(EMBED)]
    )
    for i in range(20):
        core.submit(req(i), 0.0)
    keys = sorted(f"q{i}/n/1" for i in range(20))  # the fake's FCFS tie-break: arrival, key
    (first,) = core.step(0.0).of_type(Dispatch)
    assert [i.key for i in first.items] == keys[:8]
    snap = core.snapshot()
    assert "r0" not in snap.queues  # nothing waits behind the batch in flight
    waiting = snap.pending["minilm:1"]
    assert [v.key for v in waiting] == keys[8:]
    assert "waiting for a free replica of minilm:1" in waiting[0].why
    core.ingest(ReplicaLoaded("late", "minilm:1", ("d001",)), 0.001)
    plan = core.step(0.001)
    assert not plan.of_type(MoveStep)  # nothing to steal: the new replica just takes work
    (d,) = plan.of_type(Dispatch)
    assert d.replica_id == "late" and [i.key for i in d.items] == keys[8:16]
    res = BatchResult(first.batch_id, 1000, tuple(StepResult(i.key) for i in first.items))
    core.complete(res, 0.002)
    assert not core.step(0.002).of_type(Dispatch)  # 4 of 8: the batch waits for its delay
    assert core.snapshot().pending == {} and len(core.snapshot().queues["r0"]) == 4
    wake = core.next_wakeup(0.002)  # counted from when the steps became ready, not bound
    assert wake == pytest.approx(SizeDelayConfig().max_queue_delay_s)
    (d2,) = core.step(wake).of_type(Dispatch)
    assert d2.replica_id == "r0" and [i.key for i in d2.items] == keys[16:]


def test_misuse_raises_naming_the_value() -> None:
    core = make_core(FcfsTenancy(), devs=DEVS, workflows=[single(EMBED)])
    with pytest.raises(UnknownWorkflowError, match="'nope'"):
        core.submit(req(1, "nope"), 0.0)
    core.submit(req(1), 0.0)
    with pytest.raises(DuplicateRequestError, match="'q1'"):
        core.submit(req(1), 0.0)
    bad = dict(RAG, nodes=[dict(n) for n in RAG["nodes"]])
    bad["nodes"][0]["model"] = "ghost:1"
    with pytest.raises(InvalidWorkflowError, match="ghost"):
        core.ingest(WorkflowRegistered(dag_from_dict(bad)), 0.0)


def test_snapshot_is_immutable() -> None:
    core = make_core(
        FcfsTenancy(), devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[single(EMBED)]
    )
    core.submit(req(1), 0.0)
    core.step(0.0)
    snap = core.snapshot()
    with pytest.raises(AttributeError):
        snap.now = 3.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        snap.counters["x"] = 1  # type: ignore[index]
    core.step(core.next_wakeup(0.0) or 1.0)
    assert len(snap.queues["r0"]) == 1 and snap.batches == ()
