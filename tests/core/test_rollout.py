"""Placement convergence and rollout decisions: safe rollout under load, failed loads roll
back, drained replicas get no new work, canary splits, scale-to-zero, loads without a cold pool."""

from __future__ import annotations

from collections import Counter

import pytest

from control.core.actions import (
    Dispatch,
    DrainReplica,
    EvictReplica,
    LoadModel,
    ReplicaRoutable,
    RolloutTransition,
    RunFinished,
)
from control.core.context import CoreConfig
from control.core.errors import UnknownDeviceError
from control.core.events import PlacementChanged, RollbackRequested
from control.core.types import ModelSpec, Request
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, MODELS, devices, latency, make_core, single
from tests.support.replay import Arrival, ReplayDriver, SimExecutor

DEVS = devices(4)  # hot pool only
TYPES = {d.device_id: d.accelerator for d in DEVS}
EMBED2 = ModelSpec("minilm", "2", "embed", 100, max_batch_size=8, max_batch_tokens=4096)


def stream(n: int, gap: float, start: float = 0.0) -> list[Arrival]:
    return [
        Arrival(start + i * gap, Request(f"q{i}", f"t{i % 3}", "only-minilm", prompt_tokens=128))
        for i in range(n)
    ]


def world(reps, config: CoreConfig | None = None, fail_load=lambda a: None):  # noqa: ANN001, ANN201
    models = (*MODELS, EMBED2)
    core = make_core(FcfsTenancy(), models, DEVS, reps, [single(EMBED)], config=config,
                     lat=latency(models))  # fmt: skip
    return core, ReplayDriver(core, SimExecutor(latency(models), TYPES, fail_load=fail_load))


def plan(plan_id: str, *placements, splits=()) -> PlacementChanged:  # noqa: ANN001
    return PlacementChanged(plan_id, tuple(placements), splits)


def transitions(log) -> list[tuple[str, str]]:  # noqa: ANN001
    return [(a.plan_id, a.to_state) for _, a in log if isinstance(a, RolloutTransition)]


def finished(log) -> Counter:  # noqa: ANN001
    return Counter(a.status for _, a in log if isinstance(a, RunFinished))


def check_routing_windows(log) -> None:  # noqa: ANN001
    """No dispatch on a replica before it is routable (rollout loads) or after its drain."""
    routable_at = {a.replica_id: t for t, a in log if isinstance(a, ReplicaRoutable)}
    drained_at = {a.replica_id: t for t, a in log if isinstance(a, DrainReplica)}
    plan_loads = {a.replica_id for _, a in log if isinstance(a, LoadModel)}
    for t, a in log:
        if isinstance(a, Dispatch) and a.replica_id is not None:
            if a.replica_id in plan_loads:
                assert t >= routable_at[a.replica_id], f"{a.replica_id} used before routable"
            if a.replica_id in drained_at:
                assert t < drained_at[a.replica_id], f"{a.replica_id} got work after its drain"


def test_rollout_under_continuous_load_completes_every_request() -> None:
    core, driver = world([(EMBED.key, "d000"), (EMBED.key, "d001")])
    driver.schedule(
        0.5, plan("p1", (EMBED.key, ("d002",), 1, "hot"), (EMBED.key, ("d003",), 1, "hot"))
    )
    arrivals = stream(800, 0.0025)
    log = driver.run(arrivals)
    assert finished(log) == Counter({"succeeded": 800})
    assert transitions(log) == [("p1", "loading"), ("p1", "draining"), ("p1", "completed")]
    check_routing_windows(log)
    evicted = {a.replica_id for _, a in log if isinstance(a, EvictReplica)}
    assert evicted == {"r0", "r1"}
    snap = core.snapshot()
    assert sorted(r.device_ids for r in snap.replicas) == [("d002",), ("d003",)]
    assert snap.rollout is not None and snap.rollout.state == "completed"
    assert (snap.rollout.loaded, snap.rollout.evicted) == (2, 2)


def test_failing_load_aborts_and_restores_the_previous_placement() -> None:
    fail = lambda a: "out of memory" if a.device_ids == ("d003",) else None  # noqa: E731
    core, driver = world([(EMBED.key, "d000"), (EMBED.key, "d001")], fail_load=fail)
    driver.schedule(
        0.3, plan("p1", (EMBED.key, ("d002",), 1, "hot"), (EMBED.key, ("d003",), 1, "hot"))
    )
    log = driver.run(stream(400, 0.0025))
    assert finished(log) == Counter({"succeeded": 400})
    states = transitions(log)
    assert ("p1", "aborted") in states and ("p1:rollback", "completed") in states
    assert ("p1", "completed") not in states
    abort = next(a for _, a in log if isinstance(a, RolloutTransition) and a.to_state == "aborted")
    assert "failed" in abort.reason
    check_routing_windows(log)
    snap = core.snapshot()
    assert sorted(r.replica_id for r in snap.replicas) == ["r0", "r1"]  # untouched originals


def test_rollback_request_converges_back_the_same_way() -> None:
    core, driver = world([(EMBED.key, "d000")])
    driver.schedule(0.1, plan("p1", (EMBED.key, ("d001",), 1, "hot")))
    driver.schedule(2.0, RollbackRequested("operator"))
    log = driver.run(stream(1000, 0.003))
    assert finished(log) == Counter({"succeeded": 1000})
    assert transitions(log)[-1] == ("p1:rollback", "completed")
    check_routing_windows(log)
    assert [r.device_ids for r in core.snapshot().replicas] == [("d000",)]


def test_rollback_without_an_earlier_plan_is_refused_with_a_reason() -> None:
    _, driver = world([(EMBED.key, "d000")])
    driver.schedule(0.0, RollbackRequested("why not"))
    log = driver.run(stream(3, 0.01))
    refused = [a for _, a in log if isinstance(a, RolloutTransition)]
    assert [a.to_state for a in refused] == ["refused"] and "no earlier plan" in refused[0].reason


def test_unknown_device_in_a_plan_raises_naming_it() -> None:
    core, _ = world([(EMBED.key, "d000")])
    with pytest.raises(UnknownDeviceError, match="d999"):
        core.ingest(plan("bad", (EMBED.key, ("d999",), 1, "hot")), 0.0)


@pytest.mark.parametrize("canary_weight", [10, 30])
def test_canary_split_within_tolerance(canary_weight: int) -> None:
    core, driver = world([(EMBED.key, "d000")])
    split = ((EMBED.key, ((EMBED.key, 100 - canary_weight), (EMBED2.key, canary_weight))),)
    driver.schedule(
        0.0, plan("canary", (EMBED.key, ("d000",), 1, "hot"), (EMBED2.key, ("d001",), 1, "hot"),
                  splits=split),
    )  # fmt: skip
    log = driver.run(stream(1500, 0.002, start=1.0))
    assert finished(log) == Counter({"succeeded": 1500})
    served = Counter(a.model_key for t, a in log if isinstance(a, Dispatch) for _ in a.items)
    share = served[EMBED2.key] / sum(served.values())
    assert abs(share - canary_weight / 100) < 0.03
    assert core.snapshot().splits[EMBED.key][1] == (EMBED2.key, canary_weight)


def test_scale_to_zero_after_idle_time_and_cold_start_on_next_request() -> None:
    core, driver = world([(EMBED.key, "d000")], CoreConfig(scale_to_zero_idle_s=2.0))
    arrivals = stream(1, 0.0) + [
        Arrival(10.0, Request("late", "t0", "only-minilm", prompt_tokens=64))
    ]
    log = driver.run(arrivals)
    evictions = [(t, a) for t, a in log if isinstance(a, EvictReplica)]
    assert all("scale to zero" in a.reason for _, a in evictions)
    # at the minimum idle time (a wake-up), not at the next request; again after the cold start
    assert [round(t, 1) for t, _ in evictions] == [2.0, 12.5]  # 0.5 s load, then 2 s idle
    loads = [(t, a) for t, a in log if isinstance(a, LoadModel)]
    assert [t for t, _ in loads] == [10.0] and finished(log) == Counter({"succeeded": 2})
    assert core.snapshot().cold_starts == 1


def test_without_a_cold_pool_the_least_busy_device_takes_the_load() -> None:
    core, driver = world([(EMBED2.key, "d000")])  # d000 busy with another model; no cold pool
    busy = [Arrival(0.0, Request(f"b{i}", "t0", "only-minilm", prompt_tokens=64)) for i in range(3)]
    log = driver.run(busy)
    loads = [a for _, a in log if isinstance(a, LoadModel)]
    assert len(loads) == 1 and "least-busy" in loads[0].reason
    assert finished(log) == Counter({"succeeded": 3})
