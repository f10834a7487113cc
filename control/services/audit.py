"""Audit trail: one append-only record per mutation, written in the mutation's transaction."""

from __future__ import annotations

from dataclasses import asdict, is_dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.store.records import AuditRecordView
from control.store.repositories import AuditRepository
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

    def count(self) -> int:
        with session_scope(self._factory) as session:
            return AuditRepository(session).count()
