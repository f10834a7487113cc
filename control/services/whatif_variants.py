"""What-if variants named at the operator's level, turned into the twin's scenario sections.

An operator previews a change as they would save it: a headroom reservation (``headroom_set``),
a new reserved share for every reservation (``headroom_reserved_milli``), quotas scaled
(``quota_scale_milli``), quotas created, edited or deleted (``quota_set``), tenants changed
(``tenant_set``; both in ``whatif_tenancy``), a stored placement plan (``plan_id``), a workflow
version (``workflow``), one more replica of a model or precision variant (``replica_add``).
``resolve_variants`` turns each into the twin's sections against the baseline,
with the same checks a save would make, so a preview never shows a change that could not be
saved; what it refuses raises ``ValidationError`` naming the variant's field. Reads only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from control.services.errors import ValidationError
from control.services.fleet_state import model_key, workflow_spec
from control.services.tenancy import HeadroomService
from control.services.variant_catalog import profile_key
from control.services.whatif_tenancy import quota_set, tenant_set
from control.store.tenancy_snapshot import selector_matches
from db import models as m
from sim.scenario_io import apply_variant
from sim.scenario_variants import VariantError, add_replica


def dag_dict(spec: Any) -> dict[str, Any]:
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
    return {"placement": [{"model_key": profile_key(models[p.model_id], p.variant), "replicas": p.replicas, "pool": p.pool,
                           "device_ids": [names[i] for i in p.device_ids]}
                          for p in rows if p.replicas > 0]}  # fmt: skip


def _workflow(session: Session, base: Mapping[str, Any], value: Any, where: str) -> dict:
    """Stored workflow version ``name:version`` takes the traffic of every version of it."""
    name, _, version = str(value).partition(":")
    row = session.scalars(select(m.Workflow).filter_by(name=name, version=version)).first()
    if row is None:
        raise ValidationError(where, value, "no stored workflow version by this name:version")
    spec = dag_dict(workflow_spec(row))
    flows = [w for w in base.get("workflows") or () if w["workflow"] != spec["workflow"]]
    weights = dict((base.get("workload") or {}).get("workflows") or {})
    moved = sum(w for k, w in weights.items() if k.partition(":")[0] == name) or 1
    weights = {k: w for k, w in weights.items() if k.partition(":")[0] != name}
    return {
        "workflows": [*flows, spec],
        "workload": {"workflows": {**weights, spec["workflow"]: moved}},
    }


def _replica_add(session: Session, base: Mapping[str, Any], value: Any, where: str) -> dict:
    """One more replica of a model or precision variant (``{model_key, device_ids}``) on top of
    the baseline's placement: "add an int8 replica" against "add a second fp32 one"."""
    try:
        return add_replica(base, value)
    except VariantError as exc:
        raise ValidationError(where, value, str(exc)) from None


#: Operator-level changes a what-if variant may name, each turned into the twin's sections
#: against the baseline so far. Any other key is a twin section and passes through unchanged.
VARIANT_KNOBS: dict[str, Knob] = {
    "headroom_set": _headroom_set,
    "headroom_reserved_milli": _headroom_reserved,
    "quota_scale_milli": _quota_scale,
    "quota_set": quota_set,
    "tenant_set": tenant_set,
    "plan_id": _plan,
    "workflow": _workflow,
    "replica_add": _replica_add,
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
