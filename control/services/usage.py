"""The usage ledger: append-only, one entry per (request, DAG node, attempt).

``record_usage`` is idempotent: a second call for the same (request, node, attempt) returns the
stored entry and writes nothing, on SQLite and PostgreSQL alike (the insert runs inside a
SAVEPOINT; a unique violation from a concurrent writer rolls back only that savepoint). There is
no update and no delete: a correction is a new entry under a new attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from control.services import rules as r
from control.services.audit import jsonable, write_audit
from control.services.base import ServiceBase
from control.services.errors import NotFound, UnknownReference, ValidationError
from control.store import records as rec
from control.store import repositories as repo
from db.session import session_scope

ENTITY = "usage_entry"
#: Field rules of one ledger entry (shared with the gateway's bulk writer).
USAGE_RULES = (
    r.text("request_id", 36),
    r.text("node_id", 100),
    r.text("attempt", 32),
    r.at_least("input_tokens", 0),
    r.at_least("output_tokens", 0),
    r.at_least("device_ms", 0),
    r.at_least("cost_units", 0),
    r.positive("model_id"),
    r.positive("device_id"),
)
_REFERENCES = (
    ("request_id", repo.RequestRepository, "request"),
    ("model_id", repo.ModelRepository, "model"),
    ("device_id", repo.DeviceRepository, "device"),
)


@dataclass(frozen=True)
class UsageRecording:
    """The ledger entry for the step; ``created`` is False when it was already billed."""

    entry: rec.UsageRecord
    created: bool
    reason: str


@dataclass(frozen=True)
class LedgerPage:
    """One page of ledger lines, how many match, and integer sums over all of them."""

    lines: list[rec.UsageLine]
    total: int
    totals: dict[str, int]


def _already_billed(entry: rec.UsageRecord) -> UsageRecording:
    reason = (
        f"step {entry.node_id!r} attempt {entry.attempt!r} of request {entry.request_id} was "
        f"already billed as entry {entry.id}; this call's amounts were ignored"
    )
    return UsageRecording(entry=entry, created=False, reason=reason)


class UsageLedgerService(ServiceBase):
    """Bill step attempts and read the ledger back."""

    def record_usage(
        self,
        actor: str,
        *,
        request_id: str,
        node_id: str,
        attempt: str | int,
        input_tokens: int,
        output_tokens: int,
        device_ms: int = 0,
        cost_units: int = 0,
        model_id: int | None = None,
        device_id: int | None = None,
    ) -> UsageRecording:
        """Append one entry (audited as ``create``), or return the existing one untouched.

        ``attempt`` is the attempt kind ("primary", "retry") or number; numbers are stored as
        text so both spellings share one unique key.
        """
        values: dict[str, Any] = {
            "request_id": request_id,
            "node_id": node_id,
            "attempt": str(attempt) if r.is_int(attempt) else attempt,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "device_ms": device_ms,
            "cost_units": cost_units,
            "model_id": model_id,
            "device_id": device_id,
        }
        for field in ("request_id", "node_id", "attempt", "input_tokens", "output_tokens"):
            if values[field] is None:
                raise ValidationError(field, None, "is required")
        r.validate(USAGE_RULES, values)
        return self._run(lambda session: self._record_in(session, actor, values), ENTITY)

    def _record_in(self, session: Session, actor: str, values: dict[str, Any]) -> UsageRecording:
        ledger = repo.UsageRepository(session)
        key = {k: values[k] for k in ("request_id", "node_id", "attempt")}
        found = ledger.find_one(**key)
        if found is not None:
            return _already_billed(found)
        for field, repository, entity in _REFERENCES:
            if values[field] is not None and not repository(session).exists(values[field]):
                raise UnknownReference(field, values[field], entity)
        try:
            with session.begin_nested():
                entry = ledger.add(**values, recorded_at=self._clock())
        except IntegrityError:
            found = ledger.find_one(**key)
            if found is None:
                raise
            return _already_billed(found)
        write_audit(
            session,
            at=self._clock(),
            actor=actor,
            action="create",
            entity_type=ENTITY,
            entity_id=entry.id,
            before=None,
            after=jsonable(entry),
        )
        return UsageRecording(entry=entry, created=True, reason=f"billed as entry {entry.id}")

    def get(self, entry_id: int) -> rec.UsageRecord:
        with session_scope(self._factory) as session:
            found = repo.UsageRepository(session).get(entry_id)
        if found is None:
            raise NotFound(ENTITY, entry_id)
        return found

    def list(
        self, *, request_id: str | None = None, limit: int | None = None
    ) -> list[rec.UsageRecord]:
        """Entries, oldest first, optionally of one request."""
        equal = {} if request_id is None else {"request_id": request_id}
        with session_scope(self._factory) as session:
            return repo.UsageRepository(session).list(limit=limit, **equal)

    def ledger(
        self,
        *,
        tenant_id: int | None = None,
        request_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> LedgerPage:
        """A page of entries with their tenant (oldest first), filtered in the database by
        tenant, request and time range, with sums over every matching entry."""
        with session_scope(self._factory) as session:
            page, totals = repo.UsageRepository(session).ledger(
                tenant_id=tenant_id, request_id=request_id, since=since, until=until,
                offset=offset, limit=limit,
            )  # fmt: skip
        return LedgerPage(lines=page.items, total=page.total, totals=totals)

    def totals(self, *, request_id: str | None = None) -> dict[str, int]:
        """Integer sums of input/output tokens, device ms and cost units."""
        equal = {} if request_id is None else {"request_id": request_id}
        with session_scope(self._factory) as session:
            return repo.UsageRepository(session).totals(**equal)
