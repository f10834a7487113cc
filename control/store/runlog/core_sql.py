"""The run log's statements in SQLAlchemy Core: PostgreSQL's path (and any database but a
SQLite file; there too when the raw path is switched off, see ``WriterConfig.raw_sqlite``).

Uniqueness is the database's job: ``(tenant_id, idempotency_key)`` of a request and
``(request_id, node_id, attempt)`` of a ledger entry are inserted with ``INSERT ... ON CONFLICT
DO NOTHING ... RETURNING``, so a duplicate is never written twice, whoever wins a race. Rows go
as one executemany per statement (one round trip on PostgreSQL). The statements are built once
per dialect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, bindparam, delete, insert, literal_column, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite

from control.store import lifecycle
from control.store import records as rec

REQUESTS, USAGE, INPUTS = lifecycle.REQUESTS, lifecycle.USAGE, lifecycle.INPUTS
STEPS = lifecycle.STEPS
_RECORD_FIELDS = tuple(rec.RequestRecord.__dataclass_fields__)
_INSERTS = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


class _Built:
    """The Core statements of one dialect (built on first use)."""

    def __init__(self, dialect_name: str) -> None:
        insert = _INSERTS.get(dialect_name)
        if insert is None:
            raise lifecycle.UnsupportedBackend(
                f"backend {dialect_name!r}: expected sqlite or postgresql"
            )
        key = (USAGE.c.request_id, USAGE.c.node_id, USAGE.c.attempt)
        self.insert_request = insert(REQUESTS).on_conflict_do_nothing().returning(REQUESTS.c.id)
        self.insert_usage = insert(USAGE).on_conflict_do_nothing().returning(*key)
        self.insert_steps = insert(STEPS).on_conflict_do_nothing()
        # Literal statuses: an expanding IN parameter cannot be used with executemany.
        still_open = REQUESTS.c.status.in_(
            [literal_column(f"'{s}'") for s in lifecycle.OPEN_STATUSES]
        )
        self.finish = (
            update(REQUESTS)
            .where(REQUESTS.c.id == bindparam("rid"), still_open)
            .values({f: bindparam(f"v_{f}") for f in lifecycle.FINISH_FIELDS})
        )


_BUILT: dict[str, _Built] = {}


class CoreStatements:
    """:class:`~control.store.runlog.apply.Statements` on an open Core ``connection``."""

    def __init__(self, connection: Connection) -> None:
        self.conn = connection
        name = connection.dialect.name
        built = _BUILT.get(name)
        if built is None:
            built = _BUILT[name] = _Built(name)
        self.built = built

    def insert_requests(self, rows: Sequence[Mapping[str, Any]]) -> set[str]:
        return set(self.conn.execute(self.built.insert_request, list(rows)).scalars())

    def requests_by_key(self, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], Any]:
        cols = (REQUESTS.c.tenant_id, REQUESTS.c.idempotency_key)
        query = select(REQUESTS).where(tuple_(*cols).in_(sorted(set(keys))))
        found = {}
        for row in self.conn.execute(query):
            m = row._mapping
            found[(row.tenant_id, row.idempotency_key)] = rec.RequestRecord(
                **{f: m[f] for f in _RECORD_FIELDS}
            )
        return found

    def insert_usage(self, rows: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
        return {tuple(r) for r in self.conn.execute(self.built.insert_usage, list(rows))}  # type: ignore[misc]

    def finish_requests(self, rows: Sequence[Mapping[str, Any]]) -> None:
        fields = lifecycle.FINISH_FIELDS
        params = [{"rid": r["id"], **{f"v_{f}": r.get(f) for f in fields}} for r in rows]
        self.conn.execute(self.built.finish, params)

    def insert_inputs(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.conn.execute(insert(INPUTS), list(rows))

    def insert_steps(self, rows: Sequence[Mapping[str, Any]]) -> None:
        self.conn.execute(self.built.insert_steps, list(rows))

    def drop_inputs(self, request_ids: Sequence[str]) -> None:
        self.conn.execute(delete(INPUTS).where(INPUTS.c.request_id.in_(list(request_ids))))
        self.conn.execute(delete(STEPS).where(STEPS.c.request_id.in_(list(request_ids))))
