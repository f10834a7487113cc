"""Placement rollouts on the live runtime: start one, request a rollback, record transitions.

``start(actor, plan_id)`` reads the plan's placements for the REAL devices (devices known to
the fleet state as real; declared twin-only devices are left out), refuses (Conflict) while
another rollout is loading or draining, ingests ``PlacementChanged`` into the live runtime and
audits the request. ``rollback(actor)`` ingests ``RollbackRequested``. Without a runtime both
raise ``ServiceUnavailable``.

The core reports each stage as a ``RolloutTransition`` through the actuator's ``on_rollout``
hook; ``attach`` installs ``record_transition`` there. Each transition is audited and moves the
plan's status: ``completed`` activates the plan (the previous active one is retired);
``aborted`` (the core restores the previous placement) and a completed rollback mark the plan
``rolled_back``. The database work runs on one worker thread, in arrival order, never on the
event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.core.actions import RolloutTransition
from control.core.events import PlacementChanged, RollbackRequested
from control.runtime.clock import utcnow
from control.services.audit import write_audit
from control.services.errors import Conflict, NotFound
from control.services.fleet_state import load_fleet_state, model_key
from control.services.inference import ServiceUnavailable
from control.services.placement import PlacementPlanService
from db import models as m
from db.session import session_scope

log = logging.getLogger(__name__)

SYSTEM_ACTOR = "system:rollout"
_IN_PROGRESS = ("loading", "draining")
ENTITY = "placement_rollout"


class RolloutService:
    """Rollouts of placement plans; ``inference`` is the InferenceService (may be None)."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        plans: PlacementPlanService,
        inference: Any,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._factory = factory
        self._clock = clock
        self._plans = plans
        self._inference = inference
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollout-audit")
        self._attached: Any = None
        self.pending: list[Future] = []

    @property
    def runtime(self) -> Any:
        runtime = getattr(self._inference, "runtime", None)
        if runtime is None:
            raise ServiceUnavailable("no live runtime: rollouts need `legato serve`")
        return runtime

    def attach(self) -> None:
        """Install ``record_transition`` on the runtime's actuator (idempotent)."""
        runtime = self.runtime
        actuator = getattr(runtime, "actuator", None)
        if actuator is not None and self._attached is not actuator:
            actuator.on_rollout = self.record_transition
            self._attached = actuator

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
                    out.append((models[p.model_id], devices, int(p.replicas), str(p.pool)))
        if not out:
            raise Conflict(f"placement_plan {plan_id} places nothing on a real device")
        return PlacementChanged(str(plan_id), tuple(out), reason=f"rollout of plan {plan_id}")

    def in_progress(self) -> Any:
        """The rollout view while one is loading or draining, else None."""
        ro = self.runtime.snapshot().rollout
        return ro if ro is not None and ro.state in _IN_PROGRESS else None

    async def start(self, actor: str, plan_id: int) -> PlacementChanged:
        """Start rolling out ``plan_id``; returns the event ingested."""
        runtime = self.runtime
        self.attach()
        busy = self.in_progress()
        if busy is not None:
            raise Conflict(f"rollout of plan {busy.plan_id} is {busy.state}; wait or roll back")
        event = self.placement_event(plan_id)
        await runtime.ingest(event)
        self._audit(actor, "rollout", str(plan_id), {"placements": [list(p) for p in
                                                                      event.placements]})  # fmt: skip
        return event

    async def rollback(self, actor: str) -> None:
        """Ask the core to go back to the placement before the last completed rollout."""
        runtime = self.runtime
        self.attach()
        await runtime.ingest(RollbackRequested(f"operator {actor} asked for a rollback"))
        self._audit(actor, "rollback", "", {})

    def record_transition(self, t: RolloutTransition) -> None:
        """The actuator's hook (loop thread): queue the audit + status change; never blocks."""
        self.pending = [f for f in self.pending if not f.done()]
        self.pending.append(self._writer.submit(self._apply_transition, t))

    def _apply_transition(self, t: RolloutTransition) -> None:
        try:
            after = {"from": t.from_state, "to": t.to_state, "reason": t.reason}
            self._audit(SYSTEM_ACTOR, f"transition:{t.to_state}", t.plan_id, after)
            base, _, suffix = t.plan_id.partition(":")
            if not base.isdigit():
                return  # "initial" or a plan this gateway did not start
            if t.to_state == "completed" and not suffix:
                self._plans.activate(SYSTEM_ACTOR, int(base))
            elif (t.to_state == "aborted" and not suffix and "superseded" not in t.reason) or (
                t.to_state == "completed" and suffix == "rollback"
            ):
                self._plans.update(SYSTEM_ACTOR, int(base), status="rolled_back")
        except Exception:  # a bookkeeping failure must not stop later transitions
            log.exception("could not record rollout transition %r", t)

    def _audit(self, actor: str, action: str, entity_id: str, after: dict[str, Any]) -> None:
        with session_scope(self._factory) as session:
            write_audit(session, at=self._clock(), actor=actor, action=action, entity_type=ENTITY,
                        entity_id=entity_id, before=None, after=after)  # fmt: skip
