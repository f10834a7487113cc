"""Placement rollouts on the live runtime: start one, roll back, report progress.

``start(actor, plan_id)`` reads the plan's placements for the REAL devices (devices known to
the fleet state as real; declared twin-only devices are left out), refuses (Conflict) while
another rollout is loading or draining, ingests ``PlacementChanged`` into the live runtime
(Conflict with the core's reason when the core refuses it, e.g. a tensor-parallel group that no
interconnect domain can hold: then nothing is changed or audited) and audits the request with the plan active before it (``previous_plan_id``) and the number of
replica loads and evictions it needs (``steps_total``). ``rollback(actor, plan_id=None)``
ingests ``RollbackRequested``; with a plan id it first checks that the plan is the one the live
runtime last completed. Without a runtime both raise ``ServiceUnavailable``.

The transitions the core reports as the rollout goes on are recorded by
:class:`~control.services.rollout_record.RolloutRecorder`, the runtime's ``on_rollout``
callback (given to it by the wiring). ``progress(plan_id)`` is the view the console polls (see
:class:`RolloutProgress`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.core.errors import CoreError
from control.core.events import PlacementChanged, RollbackRequested
from control.services.errors import Conflict, NotFound
from control.services.fleet_state import load_fleet_state, model_key
from control.services.inference_calls import ServiceUnavailable
from control.services.placement import PlacementPlanService
from control.services.ports import RolloutRuntime
from control.services.rollout_record import ROLLBACK, audit_rollout, rollout_records
from control.services.variant_catalog import profile_key
from db import models as m
from db.session import session_scope

_IN_PROGRESS = ("loading", "draining")
_ERRORS = ("aborted", "failed", "refused")

Slot = tuple[str, tuple[str, ...]]


def planned_steps(replicas: Iterable[Any], placements: Iterable[tuple]) -> int:
    """Replica loads plus evictions that take the fleet (``ReplicaView``s; ready or loading ones
    count) to ``placements`` ((model, devices, replicas, pool) rows): sum of |wanted - held|
    over every (model, device group) slot, as the core converges."""
    have: Counter[Slot] = Counter(
        (r.model_key, tuple(r.device_ids)) for r in replicas if r.state in ("ready", "loading")
    )
    want: Counter[Slot] = Counter()
    for model, devices, count, _ in placements:
        want[(model, tuple(devices))] += int(count)
    return sum(abs(want[s] - have[s]) for s in set(want) | set(have))


@dataclass(frozen=True)
class RolloutProgress:
    """What the console shows for one plan's rollout (the GET route's JSON, field by field).

    ``phase``: "rollout" or "rollback" (the last one run for this plan), None when never rolled
    out. ``state``: loading | draining | completed | aborted | failed, None when never rolled
    out. ``live``: the step figures come from the running core (False: from the audit log only,
    e.g. after a restart). ``steps_done`` / ``steps_total``: replica loads plus evictions done /
    needed (total None when unknown). ``errors``: reasons of aborted / failed transitions,
    oldest first. ``transitions``: every audited transition, oldest first."""

    plan_id: int
    plan_status: str
    previous_plan_id: int | None
    phase: str | None
    state: str | None
    in_progress: bool
    live: bool
    steps_done: int | None
    steps_total: int | None
    current_step: str
    loads_pending: tuple[str, ...]
    draining: tuple[str, ...]
    blocked: tuple[str, ...]
    loaded: int
    evicted: int
    moved: int
    errors: tuple[str, ...]
    transitions: tuple[dict[str, Any], ...]


class RolloutService:
    """Rollouts of placement plans on ``runtime`` (the live runtime; None: then only
    ``progress`` works, from the audit log)."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        plans: PlacementPlanService,
        runtime: RolloutRuntime | None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._factory = factory
        self._clock = clock
        self._plans = plans
        self._runtime = runtime

    @property
    def runtime(self) -> RolloutRuntime:
        if self._runtime is None:
            raise ServiceUnavailable("no live runtime: rollouts need `legato serve`")
        return self._runtime

    def placement_event(self, plan_id: int) -> PlacementChanged:
        """The plan's placements restricted to real devices (NotFound for an unknown plan;
        Conflict when nothing of it is on a real device)."""
        with session_scope(self._factory) as session:
            plan = session.get(m.PlacementPlan, plan_id)
            if plan is None:
                raise NotFound("placement_plan", plan_id)
            real = load_fleet_state(session, include_declared=False).real_devices
            names = {d.id: d.name for d in session.query(m.Device)}
            models = {r.id: model_key(r) for r in session.query(m.ServedModel)}
            rows = session.query(m.Placement).filter_by(plan_id=plan_id).order_by(m.Placement.id)
            out = []
            for p in rows:
                devices = tuple(names[i] for i in p.device_ids if i in names)
                if devices and all(d in real for d in devices):
                    key = profile_key(models[p.model_id], p.variant)
                    out.append((key, devices, int(p.replicas), str(p.pool)))
        if not out:
            raise Conflict(f"placement_plan {plan_id} places nothing on a real device")
        return PlacementChanged(str(plan_id), tuple(out), reason=f"rollout of plan {plan_id}")

    def in_progress(self) -> Any:
        """The rollout view while one is loading or draining, else None."""
        ro = self.runtime.snapshot().rollout
        return ro if ro is not None and ro.state in _IN_PROGRESS else None

    async def start(self, actor: str, plan_id: int, forced: str | None = None) -> PlacementChanged:
        """Start rolling out ``plan_id``; returns the event ingested. ``forced``: why the
        plan's gate was overridden (see ``plan_gate``); the audit record then says
        ``forced: true`` and that reason."""
        runtime = self.runtime
        busy = self.in_progress()
        if busy is not None:
            raise Conflict(f"rollout of plan {busy.plan_id} is {busy.state}; wait or roll back")
        event = self.placement_event(plan_id)
        replicas = getattr(runtime.snapshot(), "replicas", ())
        previous = self._active_plan_id()
        try:
            await runtime.ingest(event)
        except CoreError as refused:  # the core judged the plan against its fleet: unchanged
            raise Conflict(f"placement_plan {plan_id} cannot be rolled out: {refused}") from None
        self._audit(actor, "rollout", str(plan_id), {
            "placements": [list(p) for p in event.placements],
            "previous_plan_id": previous if previous != plan_id else None,
            "steps_total": planned_steps(replicas, event.placements),
            **({} if forced is None else {"forced": True, "forced_because": forced})})  # fmt: skip
        return event

    async def rollback(self, actor: str, plan_id: int | None = None) -> None:
        """Ask the core to go back to the placement before the last completed rollout. With
        ``plan_id``: NotFound for an unknown plan, Conflict unless the live runtime's last
        rollout is that plan's and it completed."""
        runtime = self.runtime
        if plan_id is not None:
            self._plans.get(plan_id)  # NotFound names it
            ro = runtime.snapshot().rollout
            if ro is None or ro.plan_id != str(plan_id) or ro.state != "completed":
                last = "none" if ro is None else f"plan {ro.plan_id} ({ro.state})"
                raise Conflict(
                    f"placement_plan {plan_id}: only the last completed rollout can be rolled "
                    f"back; the live runtime's last rollout is {last}"
                )
        await runtime.ingest(RollbackRequested(f"operator {actor} asked for a rollback"))
        self._audit(actor, ROLLBACK, "" if plan_id is None else str(plan_id), {})

    def _active_plan_id(self) -> int | None:
        active = self._plans.list(status="active")
        return active[-1].id if active else None

    def progress(self, plan_id: int) -> RolloutProgress:
        """The plan's rollout progress: live figures when the running core's rollout is this
        plan's (or its rollback), else what the audit log says. NotFound for an unknown plan."""
        plan = self._plans.get(plan_id)
        with session_scope(self._factory) as session:
            records = rollout_records(session, plan_id)
            starts = [r.after or {} for r in records if r.action == "rollout"]
            moves = [(r.entity_id, r.at, r.after or {}) for r in records
                     if r.action.startswith("transition:")]  # fmt: skip
        transitions = tuple(
            {"at": at.isoformat(), "phase": ROLLBACK if eid.endswith(ROLLBACK) else "rollout",
             "from": a.get("from"), "to": a.get("to"), "reason": a.get("reason")}
            for eid, at, a in moves
        )  # fmt: skip
        errors = tuple(str(t["reason"]) for t in transitions if t["to"] in _ERRORS)
        start = starts[-1] if starts else {}
        total = start.get("steps_total")
        return _progress_view(plan_id, plan.status, start.get("previous_plan_id"),
                              self._live_view(plan_id), transitions, errors, total)  # fmt: skip

    def _live_view(self, plan_id: int) -> Any:
        ro = None if self._runtime is None else self._runtime.snapshot().rollout
        ok = ro is not None and ro.plan_id in (str(plan_id), f"{plan_id}:{ROLLBACK}")
        return ro if ok else None

    def _audit(self, actor: str, action: str, entity_id: str, after: dict[str, Any]) -> None:
        audit_rollout(self._factory, self._clock(), actor, action, entity_id, after)


def _progress_view(plan_id: int, status: str, previous: int | None, ro: Any,
                   transitions: tuple[dict[str, Any], ...], errors: tuple[str, ...],
                   planned: int | None) -> RolloutProgress:  # fmt: skip
    """Assemble the view from the live rollout ``ro`` (None: audit only)."""
    if ro is None:
        last = transitions[-1] if transitions else None
        state = None if last is None else last["to"]
        # the audit log knows the step count only of a rollout that completed
        done = planned if state == "completed" and last["phase"] == "rollout" else None
        return RolloutProgress(
            plan_id, status, previous, None if last is None else last["phase"], state,
            state in _IN_PROGRESS, False, done, done,
            "never rolled out" if last is None else f"{state}: {last['reason']}",
            (), (), (), 0, 0, 0, errors, transitions,
        )  # fmt: skip
    phase = ROLLBACK if ro.rollback else "rollout"
    done = ro.loaded + ro.evicted
    left = len(ro.loads_pending) + len(ro.draining) + len(ro.blocked)
    total = done + left if ro.rollback or planned is None else max(planned, done + left)
    if ro.state == "completed":  # whatever the estimate said, every step is done now
        done = total = done if ro.rollback or planned is None else max(planned, done)
    return RolloutProgress(
        plan_id, status, previous, phase, ro.state, ro.state in _IN_PROGRESS, True, done, total,
        _current_step(ro), tuple(ro.loads_pending), tuple(ro.draining), tuple(ro.blocked),
        ro.loaded, ro.evicted, ro.moved, errors, transitions,
    )  # fmt: skip


def _current_step(ro: Any) -> str:
    """A sentence for the console: what the rollout is doing now."""
    if ro.state == "loading":
        what = f"loading {len(ro.loads_pending)} replica(s): {', '.join(ro.loads_pending)}"
        if ro.blocked:
            what += f"; waiting for memory: {', '.join(ro.blocked)}"
        return what
    if ro.state == "draining":
        return f"draining {len(ro.draining)} replica(s): {', '.join(ro.draining)}"
    return f"{ro.state}: {ro.reason}"
