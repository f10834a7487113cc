"""The demand a plan is proposed for: observed over a window, or given by the operator.

``observed_demand(session, fleet, since, window_s)`` reads what the fleet served since
``since``: per model, the steps billed in the usage ledger (one per request and node, retries
not counted twice) divided by the window is its arrival rate, and the mean billed device time
of those steps its service time; the requests received per workflow, times the workflow's
neighbour pairs (``model_neighbours``), give the traffic co-location weighs. Token rates are
reported beside, for the operator (the planner sizes replicas by requests and device time).

``given_demand(raw, known)`` checks an operator's demand (``{"models": {key: {"arrival_rate":
r, "service_s": s}}, "traffic": [{"a": key, "b": key, "rate": r}]}``) and raises
ValidationError naming the first bad field. Both return ``(Demand, summary)``; the summary is
the JSON stored in the plan's ``origin``. Reads only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.core.placement import Demand, ModelDemand, PlanError
from control.core.placement.demand import model_neighbours, pair
from control.services.errors import ValidationError
from control.services.fleet_state import FleetState, model_key
from db import models as m


def _model_rows(session: Session, since: datetime) -> list[tuple[Any, ...]]:
    """(model key, steps, mean device ms, input tokens, output tokens) per model since."""
    steps = (
        select(m.UsageEntry.model_id, m.UsageEntry.request_id, m.UsageEntry.node_id,
               func.max(m.UsageEntry.device_ms).label("ms"),
               func.max(m.UsageEntry.input_tokens).label("tin"),
               func.max(m.UsageEntry.output_tokens).label("tout"))
        .where(m.UsageEntry.recorded_at >= since, m.UsageEntry.model_id.is_not(None))
        .group_by(m.UsageEntry.model_id, m.UsageEntry.request_id, m.UsageEntry.node_id)
        .subquery()
    )  # fmt: skip
    q = (
        select(m.ServedModel, func.count(), func.avg(steps.c.ms), func.sum(steps.c.tin),
               func.sum(steps.c.tout))
        .join(steps, steps.c.model_id == m.ServedModel.id)
        .group_by(m.ServedModel.id)
    )  # fmt: skip
    return [(model_key(row), n, float(ms or 0), int(tin or 0), int(tout or 0))
            for row, n, ms, tin, tout in session.execute(q)]  # fmt: skip


def workflow_counts(session: Session, since: datetime) -> dict[str, int]:
    """Requests received per workflow (``name:version``, the core's key) since ``since``."""
    q = (
        select(m.Request.workflow_name, m.Request.workflow_version, func.count())
        .where(m.Request.received_at >= since)
        .group_by(m.Request.workflow_name, m.Request.workflow_version)
    )
    return {f"{name}:{version}": int(n) for name, version, n in session.execute(q)}


def observed_demand(
    session: Session, fleet: FleetState, since: datetime, window_s: float
) -> tuple[Demand, dict[str, Any]]:
    """Demand observed over ``[since, since + window_s]`` (see the module docstring)."""
    models: dict[str, ModelDemand] = {}
    summary: dict[str, Any] = {}
    for key, steps, ms, tin, tout in _model_rows(session, since):
        models[key] = ModelDemand(steps / window_s, ms / 1000.0)
        summary[key] = {
            "arrival_rate": round(steps / window_s, 6), "service_s": round(ms / 1000.0, 6),
            "input_tokens_per_s": round(tin / window_s, 3),
            "output_tokens_per_s": round(tout / window_s, 3),
        }  # fmt: skip
    counts = workflow_counts(session, since)
    traffic: dict[tuple[str, str], float] = {}
    for spec in fleet.workflows:
        rate = counts.get(spec.workflow, 0) / window_s
        for p in model_neighbours(spec):
            if rate > 0:
                traffic[p] = traffic.get(p, 0.0) + rate
    out = {"source": "observed", "window_s": window_s, "models": summary,
           "workflows": {k: round(v / window_s, 6) for k, v in sorted(counts.items())},
           "traffic": _traffic_rows(traffic.items())}  # fmt: skip
    return Demand(models, traffic), out


def _traffic_rows(items: Iterable[tuple[tuple[str, str], float]]) -> list[dict[str, Any]]:
    return [{"a": a, "b": b, "rate": round(r, 6)} for (a, b), r in sorted(items)]


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(where, value, "must be a number >= 0")
    return float(value)


def given_demand(raw: Any, known: Iterable[str]) -> tuple[Demand, dict[str, Any]]:
    """The operator's demand checked against the ``known`` model keys (module docstring)."""
    names = set(known)
    if not isinstance(raw, Mapping) or not isinstance(raw.get("models", {}), Mapping):
        raise ValidationError("demand.models", raw, "an object of model key -> demand")
    models: dict[str, ModelDemand] = {}
    for key, item in raw.get("models", {}).items():
        where = f"demand.models.{key}"
        if key not in names:
            raise ValidationError(where, key, f"no served model by this key; known {sorted(names)}")
        if not isinstance(item, Mapping) or set(item) - {"arrival_rate", "service_s"}:
            raise ValidationError(where, item, "an object with arrival_rate and service_s")
        rate = _number(f"{where}.arrival_rate", item.get("arrival_rate"))
        service = _number(f"{where}.service_s", item.get("service_s"))
        try:
            models[key] = ModelDemand(rate, service)
        except PlanError as exc:
            raise ValidationError(where, dict(item), str(exc)) from None
    traffic = _given_traffic(raw.get("traffic", []), names)
    try:
        demand = Demand(models, traffic)
    except PlanError as exc:
        raise ValidationError("demand.traffic", raw.get("traffic"), str(exc)) from None
    summary = {"source": "given",
               "models": {k: {"arrival_rate": d.arrival_rate, "service_s": d.service_s}
                          for k, d in sorted(models.items())},
               "traffic": _traffic_rows(demand.traffic.items())}  # fmt: skip
    return demand, summary


def _given_traffic(rows: Any, names: set[str]) -> dict[tuple[str, str], float]:
    if not isinstance(rows, list):
        raise ValidationError("demand.traffic", rows, "a list of {a, b, rate}")
    out: dict[tuple[str, str], float] = {}
    for i, row in enumerate(rows):
        where = f"demand.traffic[{i}]"
        if not isinstance(row, Mapping) or set(row) != {"a", "b", "rate"}:
            raise ValidationError(where, row, "an object with exactly a, b and rate")
        for side in ("a", "b"):
            if row[side] not in names:
                raise ValidationError(f"{where}.{side}", row[side], "no served model by this key")
        if row["a"] == row["b"]:
            raise ValidationError(where, dict(row), "a model is not its own neighbour")
        rate = _number(f"{where}.rate", row["rate"])
        key = pair(str(row["a"]), str(row["b"]))
        out[key] = out.get(key, 0.0) + rate
    return out
