"""Request use cases: submission with idempotency keys, and the run's status transitions.

Requests move queued -> running -> succeeded | failed | cancelled, or queued -> rejected |
cancelled | failed. Any other move is a Conflict. ``retire`` cancels.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from control.services import rules as r
from control.services.base import CrudService
from control.services.errors import (
    Conflict,
    IdempotencyConflict,
    UnknownReference,
    ValidationError,
)
from control.store import records as rec
from control.store import repositories as repo
from db import vocab

TERMINAL = frozenset({"succeeded", "failed", "rejected", "cancelled"})
_NEXT: dict[str, frozenset[str]] = {
    "queued": frozenset({"running", "rejected", "cancelled", "failed"}),
    "running": frozenset({"succeeded", "failed", "cancelled"}),
}


@dataclass(frozen=True)
class Submission:
    """A submitted request; ``existing`` is True when an idempotent retry found an earlier one."""

    request: rec.RequestRecord
    existing: bool


class RequestService(CrudService[rec.RequestRecord]):
    """Workflow runs; created by ``submit``, moved only by the transitions."""

    entity = "request"
    repository = repo.RequestRepository
    rules = (
        r.text("idempotency_key", 200),
        r.text("body_hash", 64),
        r.text("workflow_name", 200),
        r.text("workflow_version", 64),
        r.one_of("priority_class", vocab.PRIORITY_CLASSES),
        r.one_of("status", vocab.REQUEST_STATUSES),
        r.free_text("error"),
        r.mapping("result"),
    )
    updatable = frozenset()  # only through the transitions below
    retired_status = "cancelled"
    stamp_field = "received_at"
    page_order = "received_at"

    def create(self, actor: str, **values: Any) -> rec.RequestRecord:
        return self.submit(actor, **values).request

    def submit(
        self,
        actor: str,
        *,
        tenant_id: int,
        workflow_name: str,
        workflow_version: str,
        body_hash: str,
        priority_class: str | None = None,
        idempotency_key: str | None = None,
    ) -> Submission:
        """Record a new queued request for an active tenant and an existing, unretired workflow.

        With an ``idempotency_key`` already used by this tenant: the same ``body_hash`` returns
        the earlier request (``existing=True``, nothing written); a different one raises
        IdempotencyConflict. ``priority_class`` defaults to the tenant's class.
        """
        values = {
            "tenant_id": tenant_id,
            "workflow_name": workflow_name,
            "workflow_version": workflow_version,
            "body_hash": body_hash,
            "priority_class": priority_class,
            "idempotency_key": idempotency_key,
        }
        r.validate(self.rules, values)
        return self._run(lambda session: self._submit_in(session, actor, values), self.entity)

    def _submit_in(self, session: Session, actor: str, values: dict[str, Any]) -> Submission:
        tenant = repo.TenantRepository(session).get(values["tenant_id"])
        if tenant is None:
            raise UnknownReference("tenant_id", values["tenant_id"], "tenant")
        if tenant.status != "active":
            raise ValidationError(
                "tenant_id", tenant.id, f"tenant {tenant.name} is {tenant.status}"
            )
        name, version = values["workflow_name"], values["workflow_version"]
        workflow = repo.WorkflowRepository(session).find_one(name=name, version=version)
        if workflow is None or workflow.status == "retired":
            raise UnknownReference("workflow", f"{name}@{version}", "usable workflow")
        earlier = self._same_key(session, values)
        if earlier is not None:
            return earlier
        values = {**values, "priority_class": values["priority_class"] or tenant.priority_class}
        try:
            with session.begin_nested():
                record = self.repository(session).add(
                    id=str(uuid.uuid4()), received_at=self._clock(), status="queued", **values
                )
        except IntegrityError:
            # A concurrent submission with the same key won the race: answer as a retry.
            earlier = self._same_key(session, values)
            if earlier is None:
                raise
            return earlier
        self._audit(session, actor, "create", record, None, record)
        return Submission(request=record, existing=False)

    def _same_key(self, session: Session, values: dict[str, Any]) -> Submission | None:
        key = values["idempotency_key"]
        if key is None:
            return None
        found = self.repository(session).find_one(
            tenant_id=values["tenant_id"], idempotency_key=key
        )
        if found is None:
            return None
        if found.body_hash != values["body_hash"]:
            raise IdempotencyConflict(key, found.id)
        return Submission(request=found, existing=True)

    def start(self, actor: str, request_id: str) -> rec.RequestRecord:
        """queued -> running, stamping ``started_at``."""
        return self._transition(actor, request_id, "running", "start", started_at=self._clock())

    def mark_first_token(self, actor: str, request_id: str) -> rec.RequestRecord:
        """Stamp ``first_token_at`` on a running request (kept if already set)."""

        def work(session: Session) -> rec.RequestRecord:
            before = self._require(session, request_id)
            if before.status != "running":
                raise Conflict(f"request {request_id} is {before.status}, not running")
            if before.first_token_at is not None:
                return before
            after = self.repository(session).update(request_id, first_token_at=self._clock())
            self._audit(session, actor, "first_token", after, before, after)
            return after

        return self._run(work, self.entity)

    def finish(
        self,
        actor: str,
        request_id: str,
        status: str,
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> rec.RequestRecord:
        """Move to a terminal ``status`` with its result or error, stamping ``finished_at``."""
        if status not in TERMINAL:
            raise ValidationError("status", status, f"must be one of {', '.join(sorted(TERMINAL))}")
        r.validate(self.rules, {"result": result, "error": error})
        return self._transition(
            actor,
            request_id,
            status,
            "finish",
            finished_at=self._clock(),
            result=result,
            error=error,
        )

    def retire(self, actor: str, id_: Any) -> rec.RequestRecord:
        """Cancel a request that has not finished."""
        return self._transition(actor, id_, "cancelled", "cancel", finished_at=self._clock())

    def delete(self, actor: str, id_: Any) -> None:
        raise Conflict("requests are kept for billing and audit: cancel instead")

    def _transition(
        self, actor: str, request_id: str, status: str, action: str, **stamps: Any
    ) -> rec.RequestRecord:
        def work(session: Session) -> rec.RequestRecord:
            before = self._require(session, request_id)
            if status not in _NEXT.get(before.status, frozenset()):
                raise Conflict(f"request {request_id} cannot go from {before.status} to {status}")
            after = self.repository(session).update(request_id, status=status, **stamps)
            self._audit(session, actor, action, after, before, after)
            return after

        return self._run(work, self.entity)
