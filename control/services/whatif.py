"""The engine behind what-if runs: scenarios from the live database, runs in a worker process.

``scenario_from_db`` reads the fleet (``load_fleet_state``: devices, models, workflows, tenants,
quotas, headroom, the active placement, measured latency rows, cost weights) into the twin's
scenario dict, so the baseline of a what-if is the state in force now; ``prepare_scenario``
completes a what-if request with it and turns an operator's changes (a headroom reservation as it
would be saved, a quota scale, a stored plan, a workflow version: ``VARIANT_KNOBS``) into the
twin's sections, refusing with the field named what could not be saved. ``WhatIfEngine.start``
records a pending what-if run and starts the twin in a separate process (never in the request
that asked for it); the worker moves the run to ``running``, reports progress in thousandths and
finishes it with the comparison (delta tables, verdicts, the baseline report) or the error.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from control.services.analysis import WhatIfService
from control.services.errors import ValidationError
from control.services.fleet_state import FleetState, load_fleet_state, model_key, workflow_spec
from control.services.tenancy import HeadroomService
from control.store.tenancy_snapshot import selector_matches
from db import models as m
from db.session import make_engine, make_session_factory, session_scope
from sim.scenario_io import apply_variant

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
    operator's changes in ``variants`` (see :data:`VARIANT_KNOBS`) become the
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


#: Used for its field checks only (it never runs a unit of work, so it needs no database).
_RESERVATIONS = HeadroomService(sessionmaker())
Knob = Callable[[Session, Mapping[str, Any], Any, str], dict[str, Any]]


def _headroom_set(session: Session, base: Mapping[str, Any], value: Any, where: str) -> dict:
    """Reservations as the operator would save them (``id`` of a stored one to replace it,
    none to add one), checked by the headroom service's own rules, pools resolved to devices."""
    if not isinstance(value, list):
        raise ValidationError(where, value, "must be a list of reservations")
    section = [dict(h) for h in base.get("headroom") or ()]
    devices = session.scalars(select(m.Device).order_by(m.Device.id)).all()
    for i, item in enumerate(value):
        item = dict(item) if isinstance(item, Mapping) else {}
        rid = item.pop("id", None)
        try:  # the very checks a save would make, so a preview never shows an unsavable change
            _RESERVATIONS.check_fields(item, creating=rid is None)
        except ValidationError as exc:
            raise ValidationError(f"{where}[{i}].{exc.field}", exc.value, exc.message) from None
        stored = session.get(m.HeadroomReservation, rid) if rid is not None else None
        if rid is not None and stored is None:
            raise ValidationError(f"{where}[{i}].id", rid, "no headroom reservation with this id")
        old = {"name": stored.name, "selector": stored.selector,
               "reserved_milli": stored.reserved_milli, "allowed_classes": stored.allowed_classes,
               "borrowable": stored.borrowable} if stored is not None else {}  # fmt: skip
        new = {**old, **item}
        section = [h for h in section if h["reservation_id"] not in (old.get("name"), new["name"])]
        section.append({
            "reservation_id": new["name"], "reserved_milli": int(new["reserved_milli"]),
            "device_ids": sorted(d.name for d in devices if selector_matches(new["selector"], d)),
            "allowed_classes": sorted(new["allowed_classes"]), "borrowable": bool(new.get("borrowable", True)),
        })  # fmt: skip
    return {"headroom": section}


def _headroom_reserved(session: Session, base: Mapping[str, Any], value: Any, where: str) -> dict:
    """Every reservation at ``value`` thousandths of its pool."""
    if not isinstance(value, int) or not 0 <= value <= 1000:
        raise ValidationError(where, value, "must be an integer in [0, 1000] (150 = 15%)")
    return {"headroom": [{**h, "reserved_milli": value} for h in base.get("headroom") or ()]}


def _quota_scale(session: Session, base: Mapping[str, Any], value: Any, where: str) -> dict:
    """Every quota's nominal, borrowing and lending limits scaled by ``value``/1000."""
    if not isinstance(value, int) or value <= 0:
        raise ValidationError(where, value, "must be a positive integer (1000 = unchanged)")

    def scaled(q: Mapping[str, Any]) -> dict[str, Any]:
        keys = ("nominal", "borrowing_limit", "lending_limit")
        return {**q, **{k: q[k] * value // 1000 for k in keys if q.get(k) is not None}}

    return {"quotas": [scaled(q) for q in base.get("quotas") or ()]}


def _plan(session: Session, base: Mapping[str, Any], value: Any, where: str) -> dict:
    """The placements of stored plan ``value`` instead of the active ones."""
    plan = session.get(m.PlacementPlan, value) if isinstance(value, int) else None
    if plan is None:
        raise ValidationError(where, value, "no placement plan with this id")
    names = {d.id: d.name for d in session.query(m.Device)}
    models = {r.id: model_key(r) for r in session.query(m.ServedModel)}
    rows = session.query(m.Placement).filter_by(plan_id=plan.id).order_by(m.Placement.id)
    return {"placement": [{"model_key": models[p.model_id], "replicas": p.replicas, "pool": p.pool,
                           "device_ids": [names[i] for i in p.device_ids]}
                          for p in rows if p.replicas > 0]}  # fmt: skip


def _workflow(session: Session, base: Mapping[str, Any], value: Any, where: str) -> dict:
    """Stored workflow version ``name:version`` takes the traffic of every version of it."""
    name, _, version = str(value).partition(":")
    row = session.scalars(select(m.Workflow).filter_by(name=name, version=version)).first()
    if row is None:
        raise ValidationError(where, value, "no stored workflow version by this name:version")
    spec = _dag_dict(workflow_spec(row))
    flows = [w for w in base.get("workflows") or () if w["workflow"] != spec["workflow"]]
    weights = dict((base.get("workload") or {}).get("workflows") or {})
    moved = sum(w for k, w in weights.items() if k.partition(":")[0] == name) or 1
    weights = {k: w for k, w in weights.items() if k.partition(":")[0] != name}
    return {
        "workflows": [*flows, spec],
        "workload": {"workflows": {**weights, spec["workflow"]: moved}},
    }


#: Operator-level changes a what-if variant may name, each turned into the twin's sections
#: against the baseline so far. Any other key is a twin section and passes through unchanged.
VARIANT_KNOBS: dict[str, Knob] = {
    "headroom_set": _headroom_set,
    "headroom_reserved_milli": _headroom_reserved,
    "quota_scale_milli": _quota_scale,
    "plan_id": _plan,
    "workflow": _workflow,
}


def resolve_variants(
    session: Session, base: Mapping[str, Any], variants: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """Every variant as twin sections (see :data:`VARIANT_KNOBS`); reads only."""
    out = {}
    for name, changes in variants.items():
        if not isinstance(changes, Mapping):
            raise ValidationError(f"scenario.variants.{name}", changes, "must be an object")
        current, touched = dict(base), set()
        for key, value in changes.items():
            knob = VARIANT_KNOBS.get(key)
            made = {key: value} if knob is None else knob(session, current, value,
                                                          f"scenario.variants.{name}.{key}")  # fmt: skip
            current = apply_variant(current, made)
            touched |= set(made)
        out[str(name)] = {k: current[k] for k in touched}
    return out


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
