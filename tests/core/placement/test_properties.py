"""Properties of every placement policy on random fleets, models, headroom and demand."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control.core.placement import (
    PLACEMENT,
    ClusterSnapshot,
    Demand,
    DeviceEntry,
    ModelDemand,
    ModelEntry,
    apply_diff,
    diff,
    plan_with,
    violations,
)
from control.core.placement.cold_pool import ColdPoolConfig
from control.core.placement.planner import PlannerConfig
from control.core.tenancy.base import HeadroomSpec
from control.core.types import DeviceSpec, ModelSpec
from tests.core.placement.worlds import independent_violations

PRECISIONS = ("fp16", "bf16", "int8")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def worlds(draw) -> tuple[ClusterSnapshot, Demand]:  # noqa: ANN001
    n_nodes = draw(st.integers(1, 3))
    devices = []
    for n in range(n_nodes):
        per_node = draw(st.integers(1, 4))
        split = draw(st.booleans())
        for j in range(per_node):
            mem = draw(st.sampled_from([4_000, 8_000, 16_000]))
            precs = frozenset(draw(st.sets(st.sampled_from(PRECISIONS))))
            dom = f"n{n}-nv{j // 2 if split else 0}"
            status = draw(st.sampled_from(["up", "up", "up", "down"]))
            spec = DeviceSpec(f"n{n}-d{j}", f"n{n}", "gpu", "h100", mem, dom, status=status)
            devices.append(DeviceEntry(spec, precs))
    models = []
    for i in range(draw(st.integers(1, 7))):
        mem = draw(st.integers(500, 9_000))
        tp = draw(st.sampled_from([1, 1, 1, 2, 4]))
        precs = tuple(draw(st.lists(st.sampled_from(PRECISIONS), max_size=2, unique=True)))
        models.append(ModelEntry(ModelSpec(f"m{i}", "1", "embed", mem, tp_degree=tp), precs))
    ids = [d.device_id for d in devices]
    reservations = []
    for r in range(draw(st.integers(0, 2))):
        pool = draw(st.sets(st.sampled_from(ids), min_size=1))
        milli = draw(st.integers(0, 400))
        reservations.append(
            HeadroomSpec(f"r{r}", frozenset(pool), milli, frozenset({"critical"}), True)
        )
    keys = [m.key for m in models]
    rates = {k: ModelDemand(draw(st.floats(0, 50)), draw(st.floats(0, 0.2))) for k in keys}
    traffic = {}
    if len(keys) > 1:
        for _ in range(draw(st.integers(0, 4))):
            a, b = draw(st.lists(st.sampled_from(keys), min_size=2, max_size=2, unique=True))
            traffic[(a, b)] = draw(st.floats(0, 100))
    return ClusterSnapshot(tuple(devices), tuple(models), tuple(reservations)), Demand(
        rates, traffic
    )


def _configs(name: str):  # noqa: ANN202
    if name == "planner":
        return [None, PlannerConfig(cold_pool=ColdPoolConfig(count=0, fraction_milli=250))]
    return [None]


@SETTINGS
@given(worlds())
def test_plans_respect_memory_headroom_domains_and_pools(world):  # noqa: ANN001
    snapshot, demand = world
    for name in PLACEMENT:
        for cfg in _configs(name):
            plan = plan_with(name, snapshot, demand, cfg)
            assert not independent_violations(plan, snapshot), (name, plan)
            assert not violations(plan, snapshot), (name, violations(plan, snapshot))


@SETTINGS
@given(worlds())
def test_every_model_accounted_for_and_determinism(world):  # noqa: ANN001
    snapshot, demand = world
    for name in PLACEMENT:
        plan = plan_with(name, snapshot, demand)
        assert plan == plan_with(name, snapshot, demand)  # same inputs, same plan
        missing = {u.model_key: u.missing for u in plan.unplaced}
        for m in snapshot.models:
            placed = plan.replicas_of(m.key)
            if name == "naive":
                assert placed + missing.get(m.key, 0) == 1
            elif name in ("planner", "spread"):
                d = demand.of(m.key)
                want = min(
                    max(math.ceil(round(d.arrival_rate * d.service_s * 1e6) / 700_000), 1), 64
                )
                assert placed + missing.get(m.key, 0) == want, (name, m.key)
            if m.key in missing:
                assert missing[m.key] >= 1 and plan.unplaced  # listed with a reason
        assert all(u.reason for u in plan.unplaced)


@SETTINGS
@given(worlds(), st.sampled_from(sorted(PLACEMENT)), st.sampled_from(sorted(PLACEMENT)))
def test_diffs_are_exact_between_any_two_plans(world, a, b):  # noqa: ANN001
    snapshot, demand = world
    old, new = plan_with(a, snapshot, demand), plan_with(b, snapshot, demand)
    d = diff(old, new)
    assert apply_diff(old, d).placements == new.placements
    assert diff(new, new).empty
    # replica accounting: old = kept + evicted + moved away; new = kept + loaded + moved in
    kept = sum(u.replicas for u in d.unchanged)
    assert sum(p.replicas for p in old.placements) == kept + len(d.evictions) + len(d.moves)
    assert sum(p.replicas for p in new.placements) == kept + len(d.loads) + len(d.moves)


@SETTINGS
@given(worlds())
def test_replanning_from_current_plan_keeps_a_valid_layout(world):  # noqa: ANN001
    snapshot, demand = world
    first = plan_with("planner", snapshot, demand)
    again = ClusterSnapshot(snapshot.devices, snapshot.models, snapshot.headroom, first)
    second = plan_with("planner", again, demand)
    assert not violations(second, again)
    assert second.cold_devices == first.cold_devices  # cold pool is sticky
