"""Strict priority across tenants: a flagged tenant's higher class overtakes other tenants'
lower classes, charged as usual and bounded by the configured lead (``tenancy.strict``)."""

from __future__ import annotations

import pytest

from control.core.tenancy.base import TenancyConfig, TenantSpec
from control.core.tenancy.config import TenancyManagerConfig
from control.core.tenancy.manager import TenancyManager
from tests.core.tenancy.builders import step


def _manager(strict: bool, lead: int = 20_000, fair_share: str = "vtc") -> TenancyManager:
    mgr = TenancyManager(TenancyManagerConfig(fair_share=fair_share, strict_priority_lead=lead))
    tenants = (TenantSpec("a", 1, strict_priority=strict), TenantSpec("b", 1))
    mgr.configure(TenancyConfig(tenants), 0.0)
    return mgr


def _a_ahead(mgr: TenancyManager) -> None:
    """b waits with a standard step; a has been served 100 units: fair share serves b next."""
    mgr.on_enqueue(step("a-warm", "a", cost=100), 0.0)
    mgr.on_enqueue(step("b-std", "b", cls="standard", at=1.0), 1.0)
    mgr.charge("a", 100, 1.0, key="a-warm")


def _heads(mgr: TenancyManager) -> dict[str, list]:
    heads: dict[str, list] = {}
    for item in mgr.queued.values():
        heads.setdefault(item.tenant_id, []).append(item)
    return {t: sorted(own, key=mgr.queue_key) for t, own in heads.items()}


@pytest.mark.parametrize("strict, first", [(True, "a-crit"), (False, "b-std")])
def test_a_strict_tenants_critical_step_overtakes_another_tenants_standard_step(strict, first):
    mgr = _manager(strict)
    _a_ahead(mgr)
    mgr.on_enqueue(step("a-crit", "a", cls="critical", at=2.0), 2.0)
    items = [mgr.queued["b-std"], mgr.queued["a-crit"]]
    assert mgr.order(items, 3.0)[0].key == first
    assert mgr.select(_heads(mgr), 1, 3.0)[0].key == first  # late binding agrees


@pytest.mark.parametrize("strict", [True, False])
def test_only_classes_above_the_others_waiting_work_overtake(strict):
    mgr = _manager(strict)
    mgr.on_enqueue(step("a-warm", "a", cost=100), 0.0)
    mgr.on_enqueue(step("b-crit", "b", cls="critical", at=1.0), 1.0)
    mgr.on_enqueue(step("b-batch", "b", cls="batch", at=1.0), 1.0)
    mgr.charge("a", 100, 1.0, key="a-warm")
    mgr.on_enqueue(step("a-crit", "a", cls="critical", at=2.0), 2.0)
    mgr.on_enqueue(step("a-std", "a", cls="standard", at=2.0), 2.0)
    keys = [i.key for i in mgr.order(list(mgr.queued.values()), 3.0)]
    if strict:  # b's critical keeps its fair turn (same class); a's work overtakes b's batch
        assert keys == ["b-crit", "a-crit", "a-std", "b-batch"]
    else:
        assert keys == ["b-crit", "b-batch", "a-crit", "a-std"]


def test_baselines_without_counters_are_left_as_they_are():
    mgr = _manager(True, fair_share="fcfs")
    mgr.on_enqueue(step("b-std", "b", at=1.0), 1.0)
    mgr.on_enqueue(step("a-crit", "a", cls="critical", at=2.0), 2.0)
    assert [i.key for i in mgr.order(list(mgr.queued.values()), 3.0)] == ["b-std", "a-crit"]


def _serve_all(mgr: TenancyManager) -> list[str]:
    """Dispatch one step at a time in service order, charging each; the tenants served."""
    served = []
    while mgr.queued:
        item = mgr.select(_heads(mgr), 1, 5.0)[0]
        mgr.charge(item.tenant_id, item.cost_units, 5.0, key=item.key)
        served.append(item.tenant_id)
    return served


@pytest.mark.parametrize("lead, a_before_b", [(100, 10), (10**9, 40)])
def test_the_lead_bounds_how_long_others_wait(lead, a_before_b):
    """a floods critical steps; b's standard work waits for at most lead/cost of a's steps,
    then fair share alternates again. Without a real bound b waits for the whole flood."""
    mgr = _manager(True, lead=lead)
    for i in range(40):
        mgr.on_enqueue(step(f"a{i:02}", "a", cost=10, cls="critical", at=1.0), 1.0)
        mgr.on_enqueue(step(f"b{i:02}", "b", cost=10, cls="standard", at=0.5), 1.0)
    served = _serve_all(mgr)
    assert served.index("b") == a_before_b
    if lead == 100:  # past the lead the two alternate: a runs at most lead + one step ahead
        lead_milli = mgr.fair.counters()
        assert served[a_before_b : a_before_b + 6] in (["b", "a"] * 3, ["a", "b"] * 3)
        assert lead_milli["a"] == lead_milli["b"]  # both fully served, charged as usual
