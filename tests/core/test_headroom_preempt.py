"""Preemptible headroom is given back (issue 24, item 6): a critical step takes back the slots of
a reservation that a batch tenant borrowed, from work that had not started (requeued, never
failed), and never from a step that started."""

from __future__ import annotations

from control.core.actions import Dispatch, RunFinished, StepPreempted
from control.core.assembly import CoreBlueprint, build_core
from control.core.batching.size_delay import SizeDelayConfig
from control.core.binding_config import BindingConfig
from control.core.context import CoreConfig
from control.core.dag.reissue import billing_key
from control.core.dag.spec import dag_from_dict
from control.core.engine import ControlCore
from control.core.events import ReplicaLoaded
from control.core.tenancy.base import HeadroomSpec, TenancyConfig, TenantSpec
from control.core.types import BatchResult, ModelSpec, StepResult
from tests.core.test_headroom_binding import _req
from tests.support.builders import devices, latency, single

#: As the live product binds: batches dispatched ahead of a replica's end (15 ms)
LIVE = BindingConfig(dispatch_ahead_us=15_000)
#: Steps bound ahead of a replica's end, dispatched only when it is free
BOUND_AHEAD = BindingConfig(bind_ahead_us=15_000)


def _core(batch_size: int, replicas: tuple[str, ...], borrowable: bool = True,
          binding: BindingConfig = LIVE) -> ControlCore:  # fmt: skip
    """EMB replicas r0 on d000 (shared) and r1 on d001 (half of it reserved for critical),
    batches sent as soon as formed."""
    emb = ModelSpec("emb", "1", "embed", 100, max_batch_size=batch_size, max_batch_tokens=8192)
    config = CoreConfig(binding=binding,
                        batching_config=SizeDelayConfig(max_queue_delay_s=0.0))  # fmt: skip
    blueprint = CoreBlueprint(
        devices=tuple(devices(2)), models=(emb,), workflows=(dag_from_dict(single(emb)),),
        tenancy=TenancyConfig(
            (TenantSpec("flood", 1, "batch"), TenantSpec("vip", 1, "critical")),
            headroom=(HeadroomSpec("crit", frozenset({"d001"}), 500, frozenset({"critical"}),
                                   borrowable),),
        ),
        core_config=config,
    )  # fmt: skip
    core = build_core(blueprint, latency((emb,)))
    for rid in replicas:
        core.ingest(ReplicaLoaded(rid, emb.key, (f"d00{rid[1]}",)), 0.0)
    core.step(0.0)
    return core


def _flood(core: ControlCore, now: float, n: int) -> list[Dispatch]:
    for i in range(n):
        core.submit(_req(f"f{now}-{i:02d}", "flood", "batch"), now)
    return list(core.step(now).of_type(Dispatch))


def test_a_critical_step_takes_back_a_borrowed_step_queued_on_the_reserved_replica():
    core = _core(1, ("r0", "r1"), binding=BOUND_AHEAD)
    first = _flood(core, 0.0, 12)
    running = next(d for d in first if d.replica_id == "r1")  # started: never taken back
    core.step(0.0005)  # the flood binds its next step to r1's queue, borrowing headroom
    r1 = core._st.cluster.replicas["r1"]
    (borrowed,) = r1.queue
    core.submit(_req("vip-1", "vip", "critical"), 0.001)
    plan = core.step(0.001)
    (pre,) = plan.of_type(StepPreempted)
    assert (pre.key, pre.new_key, pre.dispatched) == (borrowed, borrowed, False)
    assert (pre.tenant_id, pre.priority_class, pre.replica_id) == ("flood", "batch", "r1")
    assert "critical" in pre.reason and "d001" in pre.reason
    assert list(r1.queue) == ["vip-1/n/1"]  # the critical step waits behind the started one only
    assert not plan.of_type(RunFinished)
    core.complete(BatchResult(running.batch_id, 1000, (StepResult(running.items[0].key),)), 0.002)
    (nxt,) = [d for d in core.step(0.002).of_type(Dispatch) if d.replica_id == "r1"]
    assert nxt.items[0].request_id == "vip-1"
    _drain(core, 0.003)
    (fin,) = [f for f in core._st.runs.finished if f.request.request_id == borrowed.split("/")[0]]
    assert fin.status == "succeeded"  # requeued, not failed


def test_a_critical_step_takes_back_a_borrowed_step_sent_ahead_and_is_sent_ahead_itself():
    """As live: the flood's next step is sent ahead behind the one r1 runs (borrowed, not
    started); the critical step takes it back (dropped, requeued under a fresh key, cancelled
    by the driver) and is sent ahead in its place, behind the started step only."""
    core = _core(1, ("r0", "r1"))
    first = _flood(core, 0.0, 12)
    running = next(d for d in first if d.replica_id == "r1")
    (ahead,) = [d for d in core.step(0.0005).of_type(Dispatch) if d.replica_id == "r1"]
    core.submit(_req("vip-1", "vip", "critical"), 0.001)
    plan = core.step(0.001)
    (pre,) = plan.of_type(StepPreempted)
    assert pre.key == ahead.items[0].key and pre.dispatched and pre.new_key.endswith("/2")
    (crit,) = [d for d in plan.of_type(Dispatch) if d.replica_id == "r1"]
    assert crit.items[0].request_id == "vip-1"
    r1 = core._st.cluster.replicas["r1"]
    assert list(r1.running) == [running.batch_id, crit.batch_id]
    core.complete(BatchResult(ahead.batch_id, 0, ()), 0.0012)  # its cancellation: ignored
    _drain(core, 0.003)
    assert {r.status for r in core._st.runs.finished} == {"succeeded"}


def test_a_borrowed_batch_sent_ahead_is_dropped_and_its_steps_requeued_under_fresh_keys():
    core = _core(4, ("r1",))
    (started,) = _flood(core, 0.0, 2)  # 2 of 4 slots: the unreserved share
    (ahead,) = _flood(core, 0.0001, 2)  # borrowed: sent ahead, not started
    core.submit(_req("vip-1", "vip", "critical"), 0.001)
    plan = core.step(0.001)
    taken = plan.of_type(StepPreempted)
    assert {p.key for p in taken} == {i.key for i in ahead.items}
    assert all(p.dispatched and p.new_key.endswith("/2") for p in taken)
    assert core._st.runs.steps.keys().isdisjoint(p.key for p in taken)
    r1 = core._st.cluster.replicas["r1"]
    assert list(r1.running) == [started.batch_id]  # the started batch runs on
    core.complete(BatchResult(ahead.batch_id, 0, ()), 0.0015)  # the cancelled batch: ignored
    core.complete(BatchResult(started.batch_id, 1000,
                              tuple(StepResult(i.key) for i in started.items)), 0.002)  # fmt: skip
    (nxt,) = core.step(0.002).of_type(Dispatch)
    assert "vip-1/n/1" in {i.key for i in nxt.items}
    fresh = [i for i in nxt.items if i.request_id != "vip-1"]
    old = {i.idempotency_key for i in ahead.items}
    assert fresh and all(i.idempotency_key not in old for i in fresh)
    assert {billing_key(i.idempotency_key) for i in fresh} <= old  # billed once, either way
    _drain(core, 0.003)
    assert {r.status for r in core._st.runs.finished} == {"succeeded"}


def test_batch_class_work_and_a_lending_free_reservation_take_nothing_back():
    core = _core(1, ("r0", "r1"), borrowable=False)
    _flood(core, 0.0, 12)
    core.step(0.0005)
    core.submit(_req("vip-1", "vip", "critical"), 0.001)
    assert not core.step(0.001).of_type(StepPreempted)  # nothing borrowed: nothing to take
    core = _core(1, ("r0", "r1"))
    _flood(core, 0.0, 12)
    core.step(0.0005)
    assert not _flood(core, 0.001, 3) and not core.step(0.001).of_type(StepPreempted)


def _drain(core: ControlCore, now: float) -> None:
    """Complete every batch in flight until no run is left."""
    for _ in range(200):
        batches = list(core._st.cluster.batches.values())
        if not batches and not core._st.runs.active:
            return
        for b in batches:
            core.complete(BatchResult(b.batch_id, 1000, tuple(StepResult(k) for k in b.items)),
                          now)  # fmt: skip
        core.step(now)
        now += 0.002
    raise AssertionError("runs left: " + ", ".join(core._st.runs.active))
