"""Headroom under overload: a device reserved for the critical class is kept free of
lower-class work (late binding, routing and stealing ask the reservation before they bind),
and a critical step goes to the reserved device whose queue is empty, at once, whatever the
flood queued elsewhere."""

from __future__ import annotations

import pytest

from control.core.actions import Dispatch
from control.core.assembly import CoreBlueprint, build_core
from control.core.binding_config import BindingConfig
from control.core.context import CoreConfig
from control.core.dag.spec import dag_from_dict
from control.core.engine import ControlCore
from control.core.events import ReplicaLoaded
from control.core.tenancy.base import HeadroomSpec, TenancyConfig, TenantSpec
from control.core.types import BatchResult, ModelSpec, Request, StepResult
from tests.support.builders import devices, latency, single

EMB = ModelSpec("emb", "1", "embed", 100, max_batch_size=1, max_batch_tokens=8192)
DEVS = devices(2)  # d000 (shared) and d001 (reserved below)
FLOOD = 12


def _core(pool: frozenset[str], borrowable: bool = False, late: bool = True,
          steal: bool = True) -> ControlCore:  # fmt: skip
    """Two replicas of EMB (r0 on d000, r1 on d001); half of ``pool`` reserved for the
    critical class (500 milli, as the admin API allows at most)."""
    from control.core.routing.stealing import StealConfig

    config = CoreConfig(binding=BindingConfig(enabled=late), stealing=StealConfig(enabled=steal))
    blueprint = CoreBlueprint(
        devices=tuple(DEVS),
        models=(EMB,),
        workflows=(dag_from_dict(single(EMB)),),
        tenancy=TenancyConfig(
            (TenantSpec("flood", 1, "batch"), TenantSpec("vip", 1, "critical")),
            headroom=(HeadroomSpec("crit", pool, 500, frozenset({"critical"}), borrowable),),
        ),
        core_config=config,
    )
    core = build_core(blueprint, latency((EMB,)))
    core.ingest(ReplicaLoaded("r0", EMB.key, ("d000",)), 0.0)
    core.ingest(ReplicaLoaded("r1", EMB.key, ("d001",)), 0.0)
    core.step(0.0)
    return core


def _req(rid: str, tenant: str, cls: str) -> Request:
    return Request(rid, tenant, "only-emb", cls, prompt_tokens=400)


def _flood(core: ControlCore, now: float, n: int = FLOOD) -> list[Dispatch]:
    for i in range(n):
        core.submit(_req(f"f{now:.3f}-{i:02d}", "flood", "batch"), now)
    return core.step(now).of_type(Dispatch)


def _finish(core: ControlCore, d: Dispatch, now: float) -> list[Dispatch]:
    core.complete(BatchResult(d.batch_id, 10_000, tuple(StepResult(i.key) for i in d.items)), now)
    return core.step(now).of_type(Dispatch)


def _flood_on(dispatches: list[Dispatch]) -> set[str]:
    return {d.device_ids[0] for d in dispatches if d.items[0].request_id.startswith("f")}


@pytest.mark.parametrize("late", [True, False], ids=["late-binding", "bound-at-once"])
def test_a_reserved_device_takes_no_flood_step_and_the_critical_step_runs_there_at_once(late):
    core = _core(frozenset({"d001"}), late=late)
    first = _flood(core, 0.0)
    assert _flood_on(first) == {"d000"}  # the flood runs on the shared device only
    r1 = core._st.cluster.replicas["r1"]
    assert not r1.queue and not r1.running  # nothing of the flood bound to the reserved one
    core.submit(_req("vip-1", "vip", "critical"), 0.001)
    (crit,) = core.step(0.001).of_type(Dispatch)  # at once: it waits behind no flood step
    assert crit.device_ids == ("d001",) and crit.items[0].request_id == "vip-1"
    # the flood keeps running on d000 only, batch after batch, with d001 idle again
    shared = next(d for d in first if d.device_ids == ("d000",))
    later = _finish(core, crit, 0.002) + _finish(core, shared, 0.003)
    assert _flood_on(later) == {"d000"}
    assert not r1.queue and not r1.running


def test_an_idle_reserved_replica_does_not_steal_flood_steps():
    core = _core(frozenset({"d001"}), late=False)
    _flood(core, 0.0)
    r0, r1 = (core._st.cluster.replicas[r] for r in ("r0", "r1"))
    assert len(r0.queue) == FLOOD - 1  # the rest of the flood waits on the shared replica
    core.submit(_req("vip-1", "vip", "critical"), 0.001)
    (crit,) = core.step(0.001).of_type(Dispatch)
    assert crit.device_ids == ("d001",)
    # r1 idle again with r0 backlogged: stealing would pay, the reservation says no
    assert not _finish(core, crit, 0.002)
    assert not r1.queue and not r1.running and len(r0.queue) == FLOOD - 1


def test_a_reserved_share_of_a_pool_leaves_the_flood_one_device_and_critical_the_other():
    core = _core(frozenset({"d000", "d001"}))  # 500 milli of two one-slot devices: one slot
    first = _flood(core, 0.0)
    assert len(first) == 1  # the flood may hold one slot of the pool, not both
    busy = first[0].device_ids[0]
    core.submit(_req("vip-1", "vip", "critical"), 0.001)
    (crit,) = core.step(0.001).of_type(Dispatch)
    assert crit.items[0].request_id == "vip-1" and crit.device_ids[0] != busy
    # the guard counts the critical step's slot against the flood's share (every slot not
    # preemptible does): the flood waits while it runs, and takes a slot again after
    assert not _finish(core, first[0], 0.002)
    (nxt,) = _finish(core, crit, 0.003)
    assert nxt.items[0].request_id.startswith("f")


def test_a_borrowable_reservation_lends_its_device_to_the_flood():
    core = _core(frozenset({"d001"}), borrowable=True)
    assert _flood_on(_flood(core, 0.0)) == {"d000", "d001"}


def test_admission_spreads_a_lower_class_backlog_only_over_the_devices_it_may_use():
    from control.core.actions import Reject
    from control.core.capacity import model_delay_s

    core = _core(frozenset({"d001"}))
    _flood(core, 0.0, n=60)
    st, now = core._st, 0.001
    everywhere = model_delay_s(st.cluster, st.queues, EMB.key, "batch", now)
    shared_only = model_delay_s(st.cluster, st.queues, EMB.key, "batch", now, frozenset({"r1"}))
    assert everywhere is not None and shared_only is not None and shared_only > everywhere
    late = Request("f-late", "flood", "only-emb", "batch", now + (everywhere + shared_only) / 2,
                   prompt_tokens=400)  # fmt: skip
    core.submit(late, now)
    (rej,) = [r for r in core.step(now).of_type(Reject) if r.request_id == "f-late"]
    assert "over capacity" in rej.reason and rej.retry_after_s == pytest.approx(shared_only)
    core.submit(Request("vip-2", "vip", "only-emb", "critical", now + 0.05, prompt_tokens=400),
                now)  # fmt: skip
    assert not [r for r in core.step(now).of_type(Reject) if r.request_id == "vip-2"]
