"""Behaviour of the placement policies on small hand-built worlds."""

from __future__ import annotations

import pytest

from control.core.placement import PLACEMENT, PlanError, plan_with, violations
from control.core.placement.cold_pool import ColdPoolConfig
from control.core.placement.naive import NaiveConfig
from control.core.placement.planner import PlannerConfig
from control.core.placement.replicas import ReplicaConfig, needed_replicas
from tests.core.placement.worlds import (
    RAG_MODELS,
    demand,
    fleet,
    headroom,
    independent_violations,
    model,
    rag_demand,
    snap,
)

NO_COLD = PlannerConfig(cold_pool=ColdPoolConfig(count=0))


def devices_of(plan, key):  # noqa: ANN001, ANN201
    return [p.device_ids for p in plan.placements if p.model_key == key]


@pytest.mark.parametrize(
    ("rate", "service_s", "util", "expected"),
    [
        (7.0, 0.1, 700, 1),  # exactly 0.7 erlang at 70 %: one replica, not two by float noise
        (7.1, 0.1, 700, 2),
        (100.0, 0.05, 500, 10),
        (0.0, 0.2, 700, 0),
        (1.0, 1.0, 1000, 1),
        (3.0, 1.0, 1000, 3),
    ],
)
def test_replicas_follow_demand_formula(rate, service_s, util, expected):  # noqa: ANN001
    assert needed_replicas(rate, service_s, util) == expected


@pytest.mark.parametrize(
    ("rate", "service_s", "cfg", "expected"),
    [
        (20.0, 0.1, ReplicaConfig(700), 3),  # ceil(2 / 0.7)
        (0.0, 0.1, ReplicaConfig(700, min_replicas=1), 1),
        (0.0, 0.1, ReplicaConfig(700, min_replicas=0), 0),
        (500.0, 0.1, ReplicaConfig(700, max_replicas=5), 5),
    ],
)
def test_planner_places_demanded_replica_count(rate, service_s, cfg, expected):  # noqa: ANN001
    s = snap(fleet(4, 4, 10_000), [model("m", 1_000)])
    plan = plan_with(
        "planner",
        s,
        demand({"m:1": (rate, service_s)}),
        PlannerConfig(replicas=cfg, cold_pool=ColdPoolConfig(0)),
    )
    assert plan.replicas_of("m:1") == expected
    assert not plan.unplaced
    capped = ("max_replicas", "m:1") in {(b.kind, b.subject) for b in plan.binding_constraints}
    assert capped == (needed_replicas(rate, service_s, cfg.target_util_milli) > cfg.max_replicas)


def test_neighbours_colocated_when_they_fit():
    s = snap(fleet(2, 2, 80_000), RAG_MODELS)
    for name in ("planner", "colocate"):
        plan = plan_with(name, s, rag_demand(10.0), NO_COLD if name == "planner" else None)
        emb, rr = devices_of(plan, "minilm:1"), devices_of(plan, "rerank:1")
        assert set(emb) & set(rr), f"{name}: {plan.placements}"
        (shared,) = set(emb) & set(rr)
        reasons = [p.reason for p in plan.placements if p.device_ids == shared]
        assert any("co-located" in r for r in reasons)


def test_neighbours_split_when_they_cannot_share_a_device():
    s = snap(fleet(1, 2, 3_000), [model("minilm", 2_000), model("rerank", 2_500)])
    d = demand({}, {("minilm:1", "rerank:1"): 50.0})
    plan = plan_with("colocate", s, d)
    assert devices_of(plan, "minilm:1") != devices_of(plan, "rerank:1")  # 4.5 GB cannot share 3 GB
    assert not plan.unplaced


def test_colocation_prefers_heavier_traffic():
    # a device holds two of the three models; the heavy pair shares it
    s = snap(fleet(1, 2, 5_000), [model("a", 2_000), model("b", 2_000), model("c", 2_000)])
    d = demand({}, {("a:1", "b:1"): 1.0, ("b:1", "c:1"): 30.0})
    plan = plan_with("colocate", s, d)
    assert devices_of(plan, "b:1") == devices_of(plan, "c:1")
    assert devices_of(plan, "a:1") != devices_of(plan, "b:1")


def test_tp_groups_stay_in_one_domain():
    # two nodes of 4 devices, each node two NVLink domains of 2: a TP-2 model fits a domain
    s = snap(
        fleet(2, 4, 40_000, domains_per_node=2), [model("big", 30_000, tp=2), model("s", 5_000)]
    )
    for name in PLACEMENT:
        plan = plan_with(name, s, demand({"big:1": (100.0, 0.05)}))
        assert not violations(plan, s), name
        for g in devices_of(plan, "big:1"):
            assert len(g) == 2 and g[0].rsplit("-", 1)[0] == g[1].rsplit("-", 1)[0]
            assert int(g[0][-1]) // 2 == int(g[1][-1]) // 2, g  # same domain (d0,d1) or (d2,d3)


def test_tp_degree_larger_than_any_domain_is_unplaced_with_reason():
    s = snap(fleet(2, 4, 40_000, domains_per_node=2), [model("huge", 30_000, tp=4)])
    plan = plan_with("planner", s, demand({}))
    (u,) = plan.unplaced
    assert u.model_key == "huge:1" and "tp_degree 4" in u.reason and "largest has 2" in u.reason
    assert ("tp_domain", "huge:1") in {(b.kind, b.subject) for b in plan.binding_constraints}


@pytest.mark.parametrize(
    ("models", "devices", "reservations", "kind", "subject", "words"),
    [
        ([model("x", 90_000)], fleet(1, 2, 80_000), [], "device_size", "x:1", "largest"),
        (
            [model("x", 70_000)],
            fleet(1, 2, 80_000),
            [headroom("gold", ["n0-d0", "n0-d1"], 200)],
            "headroom",
            "gold",
            "headroom",
        ),
        (
            [model("x", 1_000, precisions=("fp8",))],
            fleet(1, 2, 80_000, precisions=frozenset({"fp16"})),
            [],
            "precision",
            "x:1",
            "precisions",
        ),
        (
            [model("x", 1_000)],
            fleet(1, 2, 80_000, status="down"),
            [],
            "pool",
            "hot",
            "no up device",
        ),
    ],
)
def test_unfit_models_listed_with_reason(models, devices, reservations, kind, subject, words):  # noqa: ANN001
    s = snap(devices, models, reservations)
    for name in ("planner", "naive", "best_fit"):
        plan = plan_with(name, s, demand({}), NO_COLD if name == "planner" else None)
        assert [u.model_key for u in plan.unplaced] == ["x:1"], name
        assert words in plan.unplaced[0].reason, plan.unplaced[0].reason
        assert (kind, subject) in {(b.kind, b.subject) for b in plan.binding_constraints}, name
        assert not plan.placements


def test_full_devices_bind_memory_and_headroom():
    devs = fleet(1, 2, 10_000)
    # best fit: a -> d1 (3000 left), c -> d0 (5500 left), b -> d0 (2000 left); d fits nowhere
    models = [model("a", 6_000), model("b", 3_500), model("c", 4_500), model("d", 3_500)]
    s = snap(devs, models, [headroom("r", ["n0-d1"], 100)])
    plan = plan_with("best_fit", s, demand({}))
    kinds = {(b.kind, b.subject) for b in plan.binding_constraints}
    assert devices_of(plan, "a:1") == [("n0-d1",)] and devices_of(plan, "c:1") == [("n0-d0",)]
    assert [u.model_key for u in plan.unplaced] == ["d:1"]
    assert ("memory", "n0-d0") in kinds and ("memory", "n0-d1") in kinds
    assert ("headroom", "r") in kinds  # n0-d1 would take d without its 1000 MiB reservation
    assert not independent_violations(plan, s)


def test_headroom_keeps_reserved_share_free():
    devs = fleet(1, 1, 10_000)
    s = snap(devs, [model(f"m{i}", 1_000) for i in range(10)], [headroom("r", ["n0-d0"], 250)])
    plan = plan_with("best_fit", s, demand({}))
    assert sum(p.replicas for p in plan.placements) == 7  # 10,000 - 2,500 reserved
    assert len(plan.unplaced) == 3


def test_naive_is_round_robin_in_registration_order():
    devs = fleet(2, 2, 10_000)
    names = ["z", "a", "m", "b", "q"]  # registration order, deliberately unsorted
    s = snap(devs, [model(n, 1_000) for n in names])
    plan = plan_with(
        "naive", s, demand({f"{n}:1": (1000.0, 1.0) for n in names}, {("z:1", "a:1"): 99.0})
    )
    ids = [d.device_id for d in devs]
    for i, n in enumerate(names):
        assert devices_of(plan, f"{n}:1") == [(ids[i % 4],)]  # one replica each, demand ignored
    assert plan.cold_devices == ()


def test_naive_skips_devices_without_room_and_honours_start():
    devs = fleet(1, 3, 5_000)
    s = snap(devs, [model("a", 4_000), model("b", 4_000), model("c", 500), model("d", 4_000)])
    plan = plan_with("naive", s, demand({}), NaiveConfig(start=1))
    assert devices_of(plan, "a:1") == [("n0-d1",)]
    assert devices_of(plan, "b:1") == [("n0-d2",)]
    assert devices_of(plan, "c:1") == [("n0-d0",)]
    assert devices_of(plan, "d:1") == [("n0-d0",)] or devices_of(plan, "d:1") == []
    assert not independent_violations(plan, s)


def test_spread_uses_distinct_devices_and_nodes():
    s = snap(fleet(3, 2, 10_000), [model("m", 1_000)])
    plan = plan_with("planner", s, demand({"m:1": (30.0, 0.07)}), NO_COLD)  # 3 replicas
    groups = devices_of(plan, "m:1")
    assert len(groups) == 3
    assert len({g[0].split("-")[0] for g in groups}) == 3  # one per node


def test_spread_binds_when_every_device_holds_a_replica():
    s = snap(fleet(1, 2, 10_000), [model("m", 1_000)])
    plan = plan_with("planner", s, demand({"m:1": (30.0, 0.07)}), NO_COLD)
    assert plan.replicas_of("m:1") == 2
    assert plan.unplaced[0].missing == 1 and "already holds" in plan.unplaced[0].reason
    assert ("spread", "m:1") in {(b.kind, b.subject) for b in plan.binding_constraints}


@pytest.mark.parametrize(
    ("cfg", "n_cold"),
    [
        (ColdPoolConfig(1), 1),
        (ColdPoolConfig(0, 250), 2),
        (ColdPoolConfig(2, 100), 2),
        (ColdPoolConfig(20), 7),
    ],
)
def test_cold_pool_size_and_isolation(cfg, n_cold):  # noqa: ANN001
    s = snap(fleet(2, 4, 10_000), [model("busy", 1_000), model("idle", 1_000)])
    plan = plan_with("planner", s, demand({"busy:1": (100.0, 0.05)}), PlannerConfig(cold_pool=cfg))
    assert len(plan.cold_devices) == n_cold
    cold = set(plan.cold_devices)
    for p in plan.placements:
        assert (set(p.device_ids) <= cold) == (p.pool == "cold")
    assert [p.pool for p in plan.placements if p.model_key == "idle:1"] == ["cold"]
    assert len({d.split("-")[0] for d in cold}) == min(2, n_cold)  # spread over nodes
    assert not violations(plan, s)


def test_every_placement_has_a_reason():
    s = snap(fleet(2, 2, 80_000), RAG_MODELS)
    for name in PLACEMENT:
        plan = plan_with(name, s, rag_demand())
        assert plan.placements and all(len(p.reason) > 20 for p in plan.placements), name


def test_misuse_raises_naming_the_value():
    s = snap(fleet(1, 1), [model("m", 1)])
    with pytest.raises(PlanError, match="nope"):
        plan_with("nope", s, demand({}))
    with pytest.raises(PlanError, match="NaiveConfig"):
        plan_with("planner", s, demand({}), NaiveConfig())
    with pytest.raises(PlanError, match="stages"):
        PlannerConfig(stages=("spread", "warp"))
    with pytest.raises(PlanError, match="target_util_milli"):
        ReplicaConfig(target_util_milli=0)
    with pytest.raises(PlanError, match="distinct"):
        snap(fleet(1, 1) + fleet(1, 1), [])
