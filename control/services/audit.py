"""Audit trail: one append-only record per mutation, written in the mutation's transaction."""

from __future__ import annotations

from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.store.base import PageOf
from control.store.records import AuditRecordView
from control.store.repositories import AuditRepository, time_range
from db.models import AuditRecord
from db.session import session_scope


def jsonable(record: Any, exclude: frozenset[str] = frozenset()) -> dict[str, Any] | None:
    """A JSON-safe dict of a record (datetimes as ISO text), without the ``exclude`` fields."""
    if record is None:
        return None
    values = asdict(record) if is_dataclass(record) else dict(record)
    return {k: _plain(v) for k, v in values.items() if k not in exclude}


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def write_audit(
    session: Session,
    *,
    at: datetime,
    actor: str,
    action: str,
    entity_type: str,
    entity_id: Any,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
) -> AuditRecordView:
    """Append one audit record in the caller's transaction (the caller commits)."""
    return AuditRepository(session).add(
        at=at,
        actor=actor,
        action=action,
        entity_type=entity_type,
        entity_id=str(entity_id),
        before=before,
        after=after,
    )


class AuditService:
    """Read access to the audit log. There is no update or delete: the log is append-only."""

    def __init__(self, factory: sessionmaker[Session]) -> None:
        self._factory = factory

    def list(
        self,
        *,
        entity_type: str | None = None,
        entity_id: Any = None,
        actor: str | None = None,
        limit: int | None = None,
    ) -> list[AuditRecordView]:
        """Audit records, oldest first, filtered by whichever arguments are given."""
        equal: dict[str, Any] = {}
        if entity_type is not None:
            equal["entity_type"] = entity_type
        if entity_id is not None:
            equal["entity_id"] = str(entity_id)
        if actor is not None:
            equal["actor"] = actor
        with session_scope(self._factory) as session:
            return AuditRepository(session).list(limit=limit, **equal)

    def page(
        self,
        *,
        entity_type: str | None = None,
        entity_id: Any = None,
        actor: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        newest_first: bool = True,
        offset: int = 0,
        limit: int | None = None,
    ) -> PageOf[AuditRecordView]:
        """A page of the audit log, newest first by default, filtered in the database by
        entity, actor, action and ``at`` range (``since`` inclusive, ``until`` exclusive)."""
        equal = {k: v for k, v in (("entity_type", entity_type), ("actor", actor),
                                   ("action", action)) if v is not None}  # fmt: skip
        if entity_id is not None:
            equal["entity_id"] = str(entity_id)
        where = time_range(AuditRecord.at, since, until)
        with session_scope(self._factory) as session:
            return AuditRepository(session).page(
                offset=offset, limit=limit, newest_first=newest_first, where=where, **equal
            )

    def record(
        self,
        *,
        at: datetime,
        actor: str,
        action: str,
        entity_type: str,
        entity_id: Any,
        after: dict[str, Any] | None = None,
        before: dict[str, Any] | None = None,
    ) -> AuditRecordView:
        """Append one audit record in its own transaction, for an operator action that is
        not a row change made by a service (e.g. a test run started on a tenant's behalf, a
        live policy change)."""
        with session_scope(self._factory) as session:
            return write_audit(session, at=at, actor=actor, action=action,
                               entity_type=entity_type, entity_id=entity_id, before=before,
                               after=after)  # fmt: skip

    def count(self) -> int:
        with session_scope(self._factory) as session:
            return AuditRepository(session).count()
