"""Simulating a placement plan: the twin replays recent traffic against it and against the
placement in force, and the report is stored with the plan.

``PlanSimulator.start(actor, plan_id, window_s)`` reads the requests received over the last
``window_s`` (arrival times, tenants, workflows; prompt and output tokens from the usage
ledger) and writes them as a trace the twin replays (Mooncake JSONL, under ``trace_dir``): the
baseline is the fleet in force now (``whatif.scenario_from_db``), the variant the plan's
placements (the what-if ``plan_id`` change). With no recent request the shipped trace is
replayed instead (the what-if default workload), and the report says so. The plan's
``simulation`` becomes ``{"state": "running", ...}`` and a spawned worker (never the request
that asked) runs the twin and stores ``{"state": "done", "current": figures, "plan": figures,
"verdict": ..., "workload": ...}`` (figures: p50/p99 end-to-end seconds, throughput, SLO
attainment, per tenant) and moves a proposed or draft plan to ``simulated``; ``unprofiled``
and ``caveat`` name the placed models whose device type has no measured latency profile (the
twin predicts those from default tables); a failure stores
``{"state": "failed", "error": ...}`` and leaves the status. Both audited (actor ``twin``).
"""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from control import native
from control.clock import utcnow
from control.services.errors import Conflict
from control.services.placement import PlacementPlanService
from control.services.whatif import prepare_scenario
from db import models as m
from db.session import make_engine, make_session_factory, session_scope

ACTOR = "twin"
#: Most recent requests a replay takes (the newest ones when more arrived in the window).
MAX_REPLAYED = 400
#: Statuses a finished simulation moves to ``simulated`` (an active plan stays active).
_BEFORE_SIMULATED = ("draft", "proposed")


def recent_requests(session: Session, since: datetime) -> list[tuple[Any, ...]]:
    """(received_at, tenant name, workflow ``name:version``, input tokens, output tokens)
    since ``since``,
    oldest first, at most MAX_REPLAYED (the newest)."""
    tokens = (
        select(m.UsageEntry.request_id, func.max(m.UsageEntry.input_tokens).label("tin"),
               func.sum(m.UsageEntry.output_tokens).label("tout"))
        .group_by(m.UsageEntry.request_id).subquery()
    )  # fmt: skip
    q = (
        select(m.Request.received_at, m.Tenant.name,
               m.Request.workflow_name + ":" + m.Request.workflow_version, tokens.c.tin,
               tokens.c.tout)
        .join(m.Tenant, m.Tenant.id == m.Request.tenant_id)
        .outerjoin(tokens, tokens.c.request_id == m.Request.id)
        .where(m.Request.received_at >= since)
        .order_by(m.Request.received_at.desc()).limit(MAX_REPLAYED)
    )  # fmt: skip
    return list(reversed(session.execute(q).all()))


def recent_workload(
    factory: sessionmaker[Session], since: datetime, trace_file: Path
) -> dict[str, Any]:
    """The what-if workload replaying the requests since ``since`` (written to
    ``trace_file``); ``{}`` (the shipped trace) when there were none."""
    with session_scope(factory) as session:
        rows = recent_requests(session, since)
        known = {f"{w.name}:{w.version}" for w in session.query(m.Workflow)
                 if w.status == "active"}  # fmt: skip
    rows = [r for r in rows if r[2] in known]
    if not rows:
        return {}
    first = rows[0][0]
    tenants: dict[str, int] = {}
    workflows: dict[str, int] = {}
    with open(trace_file, "w") as fh:
        for at, tenant, workflow, tin, tout in rows:
            ms = round((at - first).total_seconds() * 1000)
            fh.write(json.dumps({"timestamp": ms, "input_length": int(tin or 1),
                                 "output_length": int(tout or 0), "hash_ids": []}) + "\n")  # fmt: skip
            tenants[tenant] = tenants.get(tenant, 0) + 1
            workflows[workflow] = workflows.get(workflow, 0) + 1
    return {"trace": "mooncake", "source": str(trace_file), "tenants": tenants,
            "workflows": workflows, "max_requests": len(rows)}  # fmt: skip


def unprofiled(session: Session, plan_id: int) -> list[str]:
    """``model:version on device_type`` for each model the plan places on a device type that
    no measured latency profile covers: the twin predicts those from its default tables, which
    can be far from the real device (``legato profile`` measures them)."""
    measured = {(p.model_id, p.device_type) for p in session.query(m.ModelLatencyProfile)}
    devices = {d.id: d.accelerator or d.kind for d in session.query(m.Device)}
    names = {r.id: f"{r.name}:{r.version}" for r in session.query(m.ServedModel)}
    found = {
        f"{names[p.model_id]} on {devices[d]}"
        for p in session.query(m.Placement).filter_by(plan_id=plan_id)
        for d in p.device_ids
        if d in devices and (p.model_id, devices[d]) not in measured
    }
    return sorted(found)


def figures(report: Any) -> dict[str, Any]:
    """The headline figures of a twin report, overall and per tenant."""

    def group(prefix: str) -> dict[str, float | None]:
        names = {"p50_s": "e2e_p50_s", "p99_s": "e2e_p99_s", "throughput_rps": "throughput_rps",
                 "slo_attainment": "slo_attainment", "requests": "requests",
                 "rejected": "rejected"}  # fmt: skip
        return {k: report.get(f"{prefix}.{v}") for k, v in names.items()}

    tenants = sorted({k.split(".")[0][len("tenant="):] for k in report.metrics
                      if k.startswith("tenant=")})  # fmt: skip
    return {**group("all"), "tenants": {t: group(f"tenant={t}") for t in tenants}}


@native.entry_point  # the spawned worker replays in the compiled twin core when there is one
def run_plan_simulation(database_url: str, plan_id: int, scenario: dict[str, Any]) -> None:
    """Worker body: replay, store the report with the plan (never raises)."""
    from sim.whatif import compare

    plans = PlacementPlanService(make_session_factory(make_engine(database_url)))
    started = dict(plans.get(plan_id).simulation or {})
    try:
        base, comps = compare(scenario["baseline"], scenario["variants"])
        done = {**started, "state": "done", "finished_at": utcnow().isoformat(),
                "current": figures(base), "plan": figures(comps[0].report),
                "verdict": comps[0].verdict}  # fmt: skip
        status = plans.get(plan_id).status
        new = "simulated" if status in _BEFORE_SIMULATED else status
        plans.update(ACTOR, plan_id, simulation=done, status=new)
    except Exception as exc:  # noqa: BLE001 - a control loop marks the item failed and goes on
        failed = {**started, "state": "failed", "error": f"{type(exc).__name__}: {exc}"}
        plans.update(ACTOR, plan_id, simulation=failed)
    finally:
        source = (scenario.get("workload") or {}).get("source")
        if source and Path(source).parent.name == "plan-traces":
            Path(source).unlink(missing_ok=True)


def _caveat(defaults: list[str]) -> str | None:
    if not defaults:
        return None
    return (
        f"predicted from the twin's default latency tables for {', '.join(defaults)} "
        "(no measured profile: run `legato profile` before trusting these figures)"
    )


class PlanSimulator:
    """Starts plan simulations of the database at ``database_url`` in spawned processes."""

    def __init__(
        self, factory: sessionmaker[Session], database_url: str, trace_dir: Path,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:  # fmt: skip
        self._factory = factory
        self._url = database_url
        self._dir = Path(trace_dir) / "plan-traces"
        self._clock = clock
        self._plans = PlacementPlanService(factory, clock)
        self._procs: dict[int, Any] = {}

    def start(self, actor: str, plan_id: int, window_s: float) -> Mapping[str, Any]:
        """Prepare the replay and start its worker; returns the ``running`` simulation.
        NotFound for an unknown plan, Conflict while one of its simulations runs."""
        plan = self._plans.get(plan_id)
        proc = self._procs.get(plan_id)
        if proc is not None and proc.is_alive():
            raise Conflict(f"placement_plan {plan_id} is being simulated already")
        self._dir.mkdir(parents=True, exist_ok=True)
        now = self._clock()
        trace = self._dir / f"plan-{plan_id}-{now.strftime('%Y%m%dT%H%M%S%f')}.jsonl"
        workload = recent_workload(self._factory, now - timedelta(seconds=window_s), trace)
        source = "recent requests" if workload else "shipped trace (no recent requests)"
        scenario = prepare_scenario(self._factory, {"workload": workload,
                                                    "variants": {"plan": {"plan_id": plan.id}}})  # fmt: skip
        with session_scope(self._factory) as session:
            defaults = unprofiled(session, plan.id)
        running = {"state": "running", "requested_by": actor, "started_at": now.isoformat(),
                   "unprofiled": defaults, "caveat": _caveat(defaults),
                   "window_s": window_s, "workload": {"source": source,
                   "requests": workload.get("max_requests"), "tenants": workload.get("tenants"),
                   "workflows": workload.get("workflows")}}  # fmt: skip
        self._plans.update(actor, plan_id, simulation=running)
        scenario["workload"] = workload
        proc = multiprocessing.get_context("spawn").Process(
            target=run_plan_simulation, args=(self._url, plan_id, scenario), daemon=True
        )
        proc.start()
        self._procs[plan_id] = proc
        return running

    def wait(self, plan_id: int, timeout_s: float | None = None) -> None:
        """Join the worker of ``plan_id`` (tests, the CLI)."""
        proc = self._procs.get(plan_id)
        if proc is not None:
            proc.join(timeout_s)
