"""The engine behind what-if runs: scenarios from the live database, runs in a worker process.

``scenario_from_db`` reads the fleet (``load_fleet_state``: devices, models, workflows, tenants,
quotas, headroom, the active placement, measured latency rows, cost weights) into the twin's
scenario dict, so the baseline of a what-if is the state in force now; ``prepare_scenario``
completes a what-if request with it and turns an operator's changes (a headroom reservation, quotas
or tenants as they would be saved, a quota scale, a stored plan, a workflow version: see
``whatif_variants``) into the twin's sections, refusing with the field named what could not be
saved. ``WhatIfEngine.start`` records a pending what-if run and starts the twin in a separate
process (never in the request that asked for it); the worker moves the run to ``running``,
reports progress in thousandths and finishes it with the comparison (delta tables, verdicts, the
baseline report) or the error.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from control import native
from control.services.analysis import WhatIfService
from control.services.errors import ValidationError
from control.services.fleet_state import FleetState, load_fleet_state
from control.services.whatif_variants import dag_dict, resolve_variants
from db import models as m
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
        "workflows": [dag_dict(w) for w in fleet.workflows],
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


def scenario_from_db(factory: sessionmaker[Session], workload: Mapping[str, Any]) -> dict[str, Any]:
    """The active state of the database as a scenario dict (declared devices included)."""
    with session_scope(factory) as session:
        fleet = load_fleet_state(session, include_declared=True)
        return fleet_to_scenario(fleet, fill_workload(session, fleet, workload))


#: Requests replayed when a workload names no limit: enough for stable percentiles over a few
#: seeds, few enough that a console preview answers in seconds.
DEFAULT_MAX_REQUESTS = 120


def fill_workload(session: Session, fleet: FleetState, wanted: Mapping[str, Any]) -> dict[str, Any]:
    """``wanted`` completed for the twin: ``trace_name`` (a stored trace) becomes ``trace`` and
    ``source``; missing ``tenants`` are the active tenants by weight, missing ``workflows`` the
    active workflows (one share each), missing ``max_requests`` DEFAULT_MAX_REQUESTS. Reads
    only; ValidationError names an unknown trace."""
    out = dict(wanted)
    name = out.pop("trace_name", None)
    if name is not None:
        row = session.scalars(select(m.Trace).where(m.Trace.name == name)).first()
        if row is None:
            raise ValidationError(
                "scenario.workload.trace_name", name, "no stored trace by this name"
            )
        out.setdefault("trace", row.format)
        out.setdefault("source", row.path)
    if not out.get("tenants"):
        out["tenants"] = {t.tenant_id: t.weight for t in fleet.tenancy.tenants
                          if t.status == "active"}  # fmt: skip
    if not out.get("workflows"):
        out["workflows"] = {w.workflow: 1 for w in fleet.workflows}
    out.setdefault("max_requests", DEFAULT_MAX_REQUESTS)
    return out


def prepare_scenario(factory: sessionmaker[Session], scenario: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario to store for a what-if request. Without a ``baseline`` (or with
    ``baseline: "active"``) the baseline is the state in force now under ``workload``; the
    operator's changes in ``variants`` (see ``whatif_variants.VARIANT_KNOBS``) become the
    twin's sections, the request itself is kept under ``requested``. Reads only; raises
    ValidationError naming the field of a change that cannot be tried."""
    out = dict(scenario)
    if out.get("baseline") in (None, "active"):
        if not isinstance(out.get("workload"), Mapping):
            if "baseline" in out:
                raise ValidationError("scenario.workload", out.get("workload"),
                                      "an object is required with baseline 'active'")  # fmt: skip
            return out
        out["baseline"] = scenario_from_db(factory, out["workload"])
    if not isinstance(out["baseline"], Mapping):
        raise ValidationError("scenario.baseline", out["baseline"], "a scenario object or 'active'")
    variants = out.get("variants") or {}
    if not isinstance(variants, Mapping):
        raise ValidationError("scenario.variants", variants, "must be an object of named changes")
    with session_scope(factory) as session:
        resolved = resolve_variants(session, out["baseline"], variants)
    if resolved != variants:
        out["requested"] = dict(variants)
        out["variants"] = resolved
    return out


@native.entry_point  # the spawned worker replays in the compiled twin core when there is one
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
