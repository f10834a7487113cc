"""The engine behind what-if runs: scenarios from the live database, runs in a worker process.

``scenario_from_db`` reads the fleet (``load_fleet_state``: devices, models, workflows, tenants,
quotas, headroom, the active placement, measured latency rows, cost weights) into the twin's
scenario dict, so the baseline of a what-if is the state in force now. ``WhatIfEngine.start``
records a pending what-if run and starts the twin in a separate process (never in the request
that asked for it); the worker moves the run to ``running``, reports progress in thousandths and
finishes it with the comparison (delta tables, verdicts, the baseline report) or the error.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.services.analysis import WhatIfService
from control.services.fleet_state import FleetState, load_fleet_state
from db.session import make_engine, make_session_factory, session_scope

ACTOR = "twin"


def fleet_to_scenario(
    fleet: FleetState, workload: Mapping[str, Any], name: str = "live"
) -> dict[str, Any]:
    """The twin's scenario dict for ``fleet`` (the dict format of ``sim.scenario_io``)."""
    return {
        "name": name,
        "devices": [d.__dict__ for d in fleet.devices if d.status == "up"],
        "models": [
            {**m.__dict__, "cost_milli": fleet.cost.weights.get(m.key).input_milli}
            if m.key in fleet.cost.weights
            else dict(m.__dict__)
            for m in fleet.models
        ],  # fmt: skip
        "workflows": [_dag_dict(w) for w in fleet.workflows],
        "placement": [
            {
                "model_key": p.model_key,
                "device_ids": list(p.device_ids),
                "replicas": p.replicas,
                "pool": p.pool,
            }
            for p in fleet.placement
        ],  # fmt: skip
        "tenants": [t.__dict__ for t in fleet.tenancy.tenants],
        "quotas": [q.__dict__ for q in fleet.tenancy.quotas],
        "headroom": [
            {
                **h.__dict__,
                "device_ids": sorted(h.device_ids),
                "allowed_classes": sorted(h.allowed_classes),
            }
            for h in fleet.tenancy.headroom
        ],  # fmt: skip
        "latency": {
            "rows": [r.__dict__ for r in fleet.latency_rows],
            "decode_rows": [r.__dict__ for r in fleet.decode_rows],
            "load_rows": [r.__dict__ for r in fleet.load_rows],
        },
        "workload": dict(workload),
    }


def _dag_dict(spec: Any) -> dict[str, Any]:
    nodes = []
    for n in spec.nodes:
        raw = {"id": n.node_id, "join": n.join, "retries": n.retries, "params": dict(n.params)}
        raw.update({k: v for k, v in (("task", n.task), ("model", n.model), ("tool", n.tool),
                    ("timeout_s", n.timeout_s), ("priority_class", n.priority_class),
                    ("deadline_s", n.deadline_s), ("map_over", n.map_over)) if v is not None})  # fmt: skip
        nodes.append(raw)
    edges = [
        {"from": f"{e.source}.{e.source_field}", "to": f"{e.target}.{e.target_field}",
         **({"when": e.when} if e.when is not None else {})}
        for e in spec.edges
    ]  # fmt: skip
    return {"workflow": spec.workflow, "inputs": dict(spec.inputs), "outputs": dict(spec.outputs),
            "nodes": nodes, "edges": edges}  # fmt: skip


def scenario_from_db(factory: sessionmaker[Session], workload: Mapping[str, Any]) -> dict[str, Any]:
    """The active state of the database as a scenario dict (declared devices included)."""
    with session_scope(factory) as session:
        return fleet_to_scenario(load_fleet_state(session, include_declared=True), workload)


def run_whatif(database_url: str, run_id: int) -> None:
    """Worker body: run the stored scenario and variants, report progress, finish the run.
    Any error ends the run as failed with the error's text (never raises)."""
    from sim.whatif import compare

    svc = WhatIfService(make_session_factory(make_engine(database_url)))
    try:
        rec = svc.update(ACTOR, run_id, status="running", progress_milli=0)
        spec = dict(rec.scenario)
        base = spec["baseline"]
        variants = spec.get("variants") or {}
        seeds = spec.get("seeds")

        def progress(done: int, total: int, label: str) -> None:
            svc.update(ACTOR, run_id, progress_milli=min(999, done * 1000 // max(total, 1)))

        report, comps = compare(base, variants, seeds=seeds, progress=progress)
        results = {
            "baseline": report.to_dict() | {"digest": report.digest()},
            "comparisons": [c.to_dict() for c in comps],
        }
        svc.finish(ACTOR, run_id, results=results)
    except Exception as exc:  # noqa: BLE001 - a control loop marks the item failed and goes on
        svc.finish(ACTOR, run_id, error=f"{type(exc).__name__}: {exc}")


class WhatIfEngine:
    """Starts what-if runs in worker processes (spawned: no state shared with the server)."""

    def __init__(self, whatif: WhatIfService, database_url: str) -> None:
        self._whatif = whatif
        self._url = database_url
        self._procs: dict[int, multiprocessing.Process] = {}

    def start(
        self, actor: str, baseline: Mapping[str, Any], variants: Mapping[str, Mapping[str, Any]],
        seeds: list[int] | None = None,
    ) -> int:  # fmt: skip
        """Record a pending run and start its worker; returns the run id at once."""
        rec = self._whatif.create(
            actor, status="pending", progress_milli=0,
            scenario={"baseline": dict(baseline), "variants": dict(variants), "seeds": seeds},
        )  # fmt: skip
        proc = multiprocessing.get_context("spawn").Process(
            target=run_whatif, args=(self._url, rec.id), daemon=True
        )
        proc.start()
        self._procs[rec.id] = proc
        return rec.id

    def wait(self, run_id: int, timeout_s: float | None = None) -> None:
        """Join the worker of ``run_id`` (tests, the CLI)."""
        proc = self._procs.get(run_id)
        if proc is not None:
            proc.join(timeout_s)
