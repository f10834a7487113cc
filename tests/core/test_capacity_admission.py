"""Admission by capacity: a run predicted to wait past its deadline is refused at the door
(Reject with the predicted drain as retry-after), lower priority classes first; off = admit."""

from __future__ import annotations

import pytest

from control.core.actions import Reject
from control.core.assembly import CoreBlueprint, build_core
from control.core.capacity import CapacityAdmissionConfig, predicted_delay_s
from control.core.context import CoreConfig
from control.core.dag.spec import dag_from_dict
from control.core.events import ReplicaLoaded
from control.core.tenancy.base import TenancyConfig, TenantSpec
from control.core.types import ModelSpec, Request
from tests.support.builders import devices, latency, single

GEN = ModelSpec("gen", "1", "generate", 100, max_batch_size=1, max_batch_tokens=8192)
DEVS = devices(1)
FLOOD = 40


def full_core(capacity: CapacityAdmissionConfig | None = None, flood_class: str = "batch"):
    """One replica with FLOOD long generate runs (no deadline) admitted and queued at t=0."""
    config = CoreConfig() if capacity is None else CoreConfig(capacity_admission=capacity)
    blueprint = CoreBlueprint(
        devices=tuple(DEVS),
        models=(GEN,),
        workflows=(dag_from_dict(single(GEN)),),
        tenancy=TenancyConfig((TenantSpec("flood", 1), TenantSpec("vip", 1))),
        core_config=config,
    )
    core = build_core(blueprint, latency((GEN,)))
    core.ingest(ReplicaLoaded("r0", GEN.key, (DEVS[0].device_id,)), 0.0)
    for i in range(FLOOD):
        core.submit(_req(f"f{i:02d}", "flood", flood_class, None), 0.0)
    assert not core.step(0.0).of_type(Reject)
    return core


def _req(rid: str, tenant: str, cls: str, deadline: float | None) -> Request:
    return Request(
        rid, tenant, "only-gen", cls, deadline, prompt_tokens=64, max_output_tokens=200
    )  # fmt: skip


def _delay(core, cls: str) -> float:  # noqa: ANN001
    st = core._st
    worst = predicted_delay_s(st.cluster, st.queues, frozenset({GEN.key}), cls, 0.001)
    assert worst is not None
    return worst[0]


def _reject_of(core, req: Request, now: float = 0.001) -> Reject | None:  # noqa: ANN001
    core.submit(req, now)
    rejects = [r for r in core.step(now).of_type(Reject) if r.request_id == req.request_id]
    return rejects[0] if rejects else None


def test_full_queue_refuses_a_run_whose_deadline_is_shorter_than_the_predicted_delay() -> None:
    core = full_core()
    delay = _delay(core, "standard")
    assert delay > 1.0  # 40 runs of 200 decode steps on one replica: seconds of backlog
    rej = _reject_of(core, _req("short", "vip", "standard", 0.001 + delay / 4))
    assert rej is not None
    assert "over capacity" in rej.reason and "predicted queue delay" in rej.reason
    assert rej.retry_after_s == pytest.approx(delay)


def test_a_run_whose_deadline_is_longer_than_the_predicted_delay_is_admitted() -> None:
    core = full_core()
    delay = _delay(core, "standard")
    assert _reject_of(core, _req("long", "vip", "standard", 0.001 + delay * 2)) is None
    assert "long" in core._st.runs.active


def test_a_run_without_a_deadline_is_admitted() -> None:
    core = full_core()
    assert _reject_of(core, _req("free", "vip", "standard", None)) is None


def test_critical_is_admitted_while_best_effort_is_refused() -> None:
    core = full_core(flood_class="batch")
    batch_delay = _delay(core, "batch")
    critical_delay = _delay(core, "critical")
    assert critical_delay < batch_delay / 5  # batch work ahead does not count for critical
    deadline = 0.001 + batch_delay / 2
    assert _reject_of(core, _req("be", "vip", "batch", deadline)) is not None
    assert _reject_of(core, _req("crit", "vip", "critical", deadline)) is None


def test_margin_makes_refusal_earlier() -> None:
    core = full_core(CapacityAdmissionConfig(margin=3.0))
    delay = _delay(core, "standard")
    assert _reject_of(core, _req("m", "vip", "standard", 0.001 + delay * 2)) is not None


def test_setting_off_is_the_old_behaviour() -> None:
    core = full_core(CapacityAdmissionConfig(enabled=False))
    delay = _delay(core, "standard")
    assert _reject_of(core, _req("short", "vip", "standard", 0.001 + delay / 4)) is None
    assert "short" in core._st.runs.active


@pytest.mark.parametrize("margin", [0.0, -1.0, float("inf"), float("nan")])
def test_bad_margin_is_refused(margin: float) -> None:
    with pytest.raises(ValueError, match="margin"):
        CapacityAdmissionConfig(margin=margin)
