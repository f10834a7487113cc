"""Recording rollout transitions: the audit trail and the plan lifecycle they move.

The core reports each stage of a rollout as a ``RolloutTransition``; the live runtime hands
each one to the ``on_rollout`` callback it was built with. :class:`RolloutRecorder` is that
callback's owner. It needs only the database (no runtime), so the wiring creates it first and
passes ``recorder.record_transition`` to the ``LiveRuntime`` it builds next.

Each transition is audited and moves the plan's status: ``completed`` activates the plan (the
previous active one is retired); an ``aborted`` rollout (a failed load: the core restores the
previous placement) and a completed rollback restore the plan lifecycle in one transaction: the
plan becomes ``rolled_back`` and the plan active before it is ``active`` again, both audited.
The database work runs on one worker thread, in arrival order, never on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.core.actions import RolloutTransition
from control.services.audit import jsonable, write_audit
from control.services.placement import PlacementPlanService
from control.store.repositories import PlacementPlanRepository
from db import models as m
from db.session import session_scope

log = logging.getLogger("control.services.rollout")

SYSTEM_ACTOR = "system:rollout"
ENTITY = "placement_rollout"
ROLLBACK = "rollback"


def rollout_records(session: Session, plan_id: int) -> list[m.AuditRecord]:
    """The audit records of the plan's rollouts and rollbacks, oldest first."""
    ids = (str(plan_id), f"{plan_id}:{ROLLBACK}")
    q = select(m.AuditRecord).where(m.AuditRecord.entity_type == ENTITY,
                                    m.AuditRecord.entity_id.in_(ids))  # fmt: skip
    return list(session.scalars(q.order_by(m.AuditRecord.id)))


def audit_rollout(
    factory: sessionmaker[Session],
    at: datetime,
    actor: str,
    action: str,
    entity_id: str,
    after: dict[str, Any],
) -> None:
    """One audit record of a rollout (``entity_id``: the plan id, ``<id>:rollback``)."""
    with session_scope(factory) as session:
        write_audit(session, at=at, actor=actor, action=action, entity_type=ENTITY,
                    entity_id=entity_id, before=None, after=after)  # fmt: skip


class RolloutRecorder:
    """Audits transitions and moves plan statuses; ``record_transition`` is the runtime's
    ``on_rollout`` callback. ``pending``: the writes queued and not yet known done."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        plans: PlacementPlanService,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._factory = factory
        self._plans = plans
        self._clock = clock
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollout-audit")
        self.pending: list[Future] = []

    def record_transition(self, t: RolloutTransition) -> None:
        """The actuator's hook (loop thread): queue the audit + status change; never blocks."""
        self.pending = [f for f in self.pending if not f.done()]
        self.pending.append(self._writer.submit(self._apply_transition, t))

    def _apply_transition(self, t: RolloutTransition) -> None:
        try:
            after = {"from": t.from_state, "to": t.to_state, "reason": t.reason}
            audit_rollout(self._factory, self._clock(), SYSTEM_ACTOR, f"transition:{t.to_state}",
                          t.plan_id, after)  # fmt: skip
            base, _, suffix = t.plan_id.partition(":")
            if not base.isdigit():
                return  # "initial" or a plan this gateway did not start
            if t.to_state == "completed" and not suffix:
                self._plans.activate(SYSTEM_ACTOR, int(base))
            elif (t.to_state == "aborted" and not suffix and "superseded" not in t.reason) or (
                t.to_state == "completed" and suffix == ROLLBACK
            ):
                self.restore(SYSTEM_ACTOR, int(base), t.reason)
        except Exception:  # a bookkeeping failure must not stop later transitions
            log.exception("could not record rollout transition %r", t)

    def restore(self, actor: str, plan_id: int, why: str) -> None:
        """One transaction: ``plan_id`` becomes ``rolled_back`` and the plan active before its
        rollout (from the rollout's audit record) ``active`` again; any other active plan is
        retired. Each change is audited; when ``plan_id`` changes, the previous plan gets an
        audit record even if it already was active (a failed load never retired it), so its
        history shows it in force again. Nothing is written when nothing changes (the
        aborted rollout's own rollback completing later)."""
        previous = self._previous_plan_id(plan_id)
        with session_scope(self._factory) as session:
            plans = PlacementPlanRepository(session)
            target = plans.get(plan_id)
            if target is None or target.status == "rolled_back":
                return
            wanted = {plan_id: "rolled_back"}
            prev = None if previous is None else plans.get(previous)
            if prev is not None and prev.status != "rolled_back":  # never revive a rolled-back plan
                wanted[previous] = "active"
            for old in plans.list(status="active"):
                wanted.setdefault(old.id, "retired")
            for pid, status in sorted(wanted.items()):
                before = plans.get(pid)
                if before.status == status and pid != previous:
                    continue
                after = plans.update(pid, status=status) if before.status != status else before
                action = {"active": "reactivate", "rolled_back": "roll_back"}.get(status, "retire")
                write_audit(session, at=self._clock(), actor=actor, action=action,
                            entity_type="placement_plan", entity_id=pid, before=jsonable(before),
                            after={**jsonable(after), "why": why})  # fmt: skip

    def _previous_plan_id(self, plan_id: int) -> int | None:
        with session_scope(self._factory) as session:
            starts = [r for r in rollout_records(session, plan_id) if r.action == "rollout"]
            return (starts[-1].after or {}).get("previous_plan_id") if starts else None
