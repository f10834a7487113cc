"""Bulk statements for request lifecycle rows and usage-ledger entries (SQLAlchemy Core).

These rows are data the gateway produces at request rate, not operator mutations: they carry no
audit record and are written many per transaction by the group-commit writer. Uniqueness is the
database's job: ``(tenant_id, idempotency_key)`` of a request and ``(request_id, node_id,
attempt)`` of a ledger entry are inserted with ``INSERT ... ON CONFLICT DO NOTHING`` (SQLite and
PostgreSQL), so a duplicate is never written twice, whoever wins a race.

Every function works inside the caller's session and transaction and never commits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Table, bindparam, literal_column, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from control.store import records as rec
from db import models as m

REQUESTS: Table = m.Request.__table__  # type: ignore[assignment]
USAGE: Table = m.UsageEntry.__table__  # type: ignore[assignment]
#: Statuses a run may still leave; a finishing update never overwrites a terminal row.
OPEN_STATUSES = ("queued", "running")
FINISH_FIELDS = ("status", "started_at", "first_token_at", "finished_at", "result", "error")


class UnsupportedBackend(RuntimeError):
    """The session's database has no INSERT ... ON CONFLICT that this module knows."""


def _insert(session: Session, table: Table) -> Any:
    """The backend's INSERT with ``on_conflict_do_nothing`` (no conflict target: any unique
    constraint, primary key included, makes the row a no-op)."""
    name = session.get_bind().dialect.name
    if name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing()
    if name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    raise UnsupportedBackend(f"backend {name!r}: expected sqlite or postgresql")


def insert_requests(session: Session, rows: Sequence[Mapping[str, Any]]) -> set[str]:
    """Insert request rows (each with its ``id``); returns the ids actually inserted. A row
    whose ``(tenant_id, idempotency_key)`` exists (or repeats earlier in ``rows``) is skipped."""
    if not rows:
        return set()
    stmt = _insert(session, REQUESTS).returning(REQUESTS.c.id)
    return set(session.execute(stmt, list(rows)).scalars())


def requests_by_key(
    session: Session, keys: Iterable[tuple[int, str]]
) -> dict[tuple[int, str], Any]:
    """Stored requests by ``(tenant_id, idempotency_key)`` for the keys given."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    cols = (REQUESTS.c.tenant_id, REQUESTS.c.idempotency_key)
    query = select(REQUESTS).where(tuple_(*cols).in_(wanted))
    return {(row.tenant_id, row.idempotency_key): row for row in session.execute(query)}


def request_record(row: Any) -> rec.RequestRecord:
    """The record of a Core result row of the requests table."""
    mapping = row._mapping
    return rec.RequestRecord(**{f: mapping[f] for f in rec.RequestRecord.__dataclass_fields__})


def finish_requests(session: Session, rows: Sequence[Mapping[str, Any]]) -> int:
    """Move open requests to their end: each row names ``id`` and every finish field. A row
    already terminal is left alone (the first end wins). Returns how many rows changed."""
    if not rows:
        return 0
    # Literal statuses: an expanding IN parameter cannot be used with executemany.
    still_open = REQUESTS.c.status.in_([literal_column(f"'{s}'") for s in OPEN_STATUSES])
    stmt = (
        update(REQUESTS)
        .where(REQUESTS.c.id == bindparam("rid"), still_open)
        .values({f: bindparam(f"v_{f}") for f in FINISH_FIELDS})
    )
    params = [{"rid": r["id"], **{f"v_{f}": r.get(f) for f in FINISH_FIELDS}} for r in rows]
    result = session.execute(stmt, params)
    return int(result.rowcount or 0)


def fail_open_requests(
    session: Session, *, received_before: Any, error: str, finished_at: Any
) -> list[str]:
    """Mark every request still queued or running that was received before
    ``received_before`` failed with ``error``; returns their ids (oldest first)."""
    query = (
        select(REQUESTS.c.id)
        .where(REQUESTS.c.status.in_(OPEN_STATUSES), REQUESTS.c.received_at < received_before)
        .order_by(REQUESTS.c.received_at)
    )
    ids = list(session.execute(query).scalars())
    if ids:
        session.execute(
            update(REQUESTS)
            .where(REQUESTS.c.id.in_(ids), REQUESTS.c.status.in_(OPEN_STATUSES))
            .values(status="failed", error=error, finished_at=finished_at)
        )
    return ids


def insert_usage(session: Session, rows: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """Append ledger entries; returns the ``(request_id, node_id, attempt)`` keys inserted.
    An entry whose key is already billed is skipped: a step is never billed twice."""
    if not rows:
        return set()
    cols = (USAGE.c.request_id, USAGE.c.node_id, USAGE.c.attempt)
    stmt = _insert(session, USAGE).returning(*cols)
    return {tuple(r) for r in session.execute(stmt, list(rows))}  # type: ignore[misc]
