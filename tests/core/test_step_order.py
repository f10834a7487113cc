"""Critical-path step order (``CoreConfig.step_order``): a tenant's waiting steps go by the
predicted work still ahead of them in the DAG, across models; classes still come first and fair
share across tenants is kept."""

from __future__ import annotations

import pytest

from control.core.actions import Dispatch, RunFinished
from control.core.assembly import CoreBlueprint, build_core
from control.core.context import CoreConfig
from control.core.dag.run import CompiledDag
from control.core.dag.spec import dag_from_dict
from control.core.events import PoliciesChanged, ReplicaLoaded
from control.core.tenancy.base import QueuedWork, TenancyConfig, TenantSpec
from control.core.tenancy.priority import within_tenant_key
from control.core.types import ModelSpec, Request
from tests.support.builders import devices, latency
from tests.support.replay import Arrival, ReplayDriver, SimExecutor

SHARED = ModelSpec("shared", "1", "generate", 100, max_batch_size=1, max_batch_tokens=8192)
DEEP = ModelSpec("deep", "1", "generate", 100, max_batch_size=1, max_batch_tokens=8192)
DEVS = devices(2)

#: two branches on one shared model: ``short`` ends there, ``long`` goes on to a slow model
FORK = {
    "workflow": "fork",
    "inputs": {"q": "text"},
    "outputs": {"a": "short.text", "b": "tail.text"},
    "nodes": [
        {"id": "short", "task": "generate", "model": SHARED.key},
        {"id": "long", "task": "generate", "model": SHARED.key},
        {"id": "tail", "task": "generate", "model": DEEP.key, "params": {"max_output_tokens": 8}},
    ],  # fmt: skip
    "edges": [
        {"from": "input.q", "to": "short.prompt"},
        {"from": "input.q", "to": "long.prompt"},
        {"from": "long.text", "to": "tail.prompt"},
    ],
}


def replay(order: str, runs: list[tuple[str, str, str]], switch_to: str | None = None) -> list:
    """Runs (request id, tenant, class) all arrive at t=0; one replica per model. With
    ``switch_to``, the core starts with ``order`` and takes that one live before the runs."""
    blueprint = CoreBlueprint(
        devices=tuple(DEVS),
        models=(SHARED, DEEP),
        workflows=(dag_from_dict(FORK),),
        tenancy=TenancyConfig((TenantSpec("a", 1), TenantSpec("b", 1))),
        core_config=CoreConfig(step_order=order),
    )
    lat = latency((SHARED, DEEP))
    core = build_core(blueprint, lat)
    core.ingest(ReplicaLoaded("r-shared", SHARED.key, (DEVS[0].device_id,)), 0.0)
    core.ingest(ReplicaLoaded("r-deep", DEEP.key, (DEVS[1].device_id,)), 0.0)
    if switch_to is not None:
        core.ingest(PoliciesChanged(CoreConfig(step_order=switch_to)), 0.0)
    arrivals = [
        Arrival(0.0, Request(rid, tenant, "fork", cls, prompt_tokens=64, max_output_tokens=4))
        for rid, tenant, cls in runs
    ]
    executor = SimExecutor(lat, {d.device_id: d.accelerator for d in DEVS})
    return ReplayDriver(core, executor).run(arrivals)


def shared_order(log: list) -> list[tuple[str, str]]:
    """(request id, node id) of every step dispatched on the shared model, in order."""
    return [
        (it.request_id, it.node_id)
        for _, a in log
        if isinstance(a, Dispatch) and a.model_key == SHARED.key
        for it in a.items
    ]


def ends(log: list) -> dict[str, float]:
    return {a.request_id: t for t, a in log if isinstance(a, RunFinished)}


RUNS = [(f"q{i}", "a", "standard") for i in range(6)]


def test_remaining_path_is_the_longest_way_to_the_end() -> None:
    dag = CompiledDag(dag_from_dict(FORK))
    cost = {"short": 10, "long": 10, "tail": 100}
    assert dag.remaining_path(lambda n: cost[n.node_id]) == {"short": 10, "long": 110, "tail": 100}


def test_arrival_order_serves_each_runs_steps_by_key() -> None:
    order = shared_order(replay("arrival", RUNS))
    # today: ready together, so by step key: each run's long then short, run after run
    assert order[:4] == [("q0", "long"), ("q0", "short"), ("q1", "long"), ("q1", "short")]


def test_critical_path_serves_the_long_branch_of_every_run_first_and_ends_sooner() -> None:
    today, critical = replay("arrival", RUNS), replay("critical_path", RUNS)
    order = shared_order(critical)
    assert [n for _, n in order[:6]] == ["long"] * 6
    assert [r for r, _ in order[:6]] == [f"q{i}" for i in range(6)]  # older runs first
    assert max(ends(critical).values()) < max(ends(today).values())
    assert {a.status for _, a in critical if isinstance(a, RunFinished)} == {"succeeded"}


@pytest.mark.parametrize(
    ("start", "switch_to"), [("arrival", "critical_path"), ("critical_path", "arrival")]
)
def test_a_live_change_of_step_order_orders_the_next_steps(start: str, switch_to: str) -> None:
    assert shared_order(replay(start, RUNS, switch_to)) == shared_order(replay(switch_to, RUNS))


def test_classes_still_come_first_within_a_tenant() -> None:
    runs = [
        ("deep-std", "a", "standard"),
        ("deep-std2", "a", "standard"),
        ("crit", "a", "critical"),
    ]
    order = shared_order(replay("critical_path", runs))
    assert order[:2] == [("crit", "long"), ("crit", "short")]


def test_fair_share_across_tenants_is_kept() -> None:
    runs = [(f"a{i}", "a", "standard") for i in range(4)] + [("b0", "b", "standard")]
    order = shared_order(replay("critical_path", runs))
    # tenant b's steps are not held behind every long step of tenant a: VTC still picks b
    # among the first items (its counter is the least served), critical path only within a
    first_b = min(i for i, (r, _) in enumerate(order) if r == "b0")
    assert first_b <= 2


def test_order_at_sorts_before_arrival_and_keeps_classes() -> None:
    base = QueuedWork("k1", "r1", "a", "standard", 5.0, 1)
    late_but_urgent = QueuedWork("k2", "r2", "a", "standard", 9.0, 1, order_at=1.0)
    early = QueuedWork("k3", "r3", "a", "standard", 2.0, 1, order_at=4.0)
    batch = QueuedWork("k4", "r4", "a", "batch", 0.0, 1, order_at=-100.0)
    ranked = sorted([batch, early, late_but_urgent], key=within_tenant_key)
    assert [w.key for w in ranked] == ["k2", "k3", "k4"]
    assert within_tenant_key(base) == (1, float("inf"), 5.0, "k1")  # today's key unchanged


def test_unknown_step_order_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="step_order"):
        CoreConfig(step_order="shortest")
