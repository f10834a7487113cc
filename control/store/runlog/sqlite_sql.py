"""The run log's statements on a raw ``sqlite3`` connection: a SQLite file's path.

Why not Core here: the writer's transaction is on every synchronous caller's path, and through
SQLAlchemy's statement machinery one accept + bill + finish cost about three times the CPU of
the same statements on the raw connection (see ``bench/gateway.py --without raw_sqlite``).
The SQL text is built from the tables, and every value goes through its column's own
SQLAlchemy type (``bind_processor``/``result_processor`` of the dialect), so the stored bytes
and the records read back are exactly those of the Core path (a test compares them). A driver
error is raised as SQLAlchemy's exception of the same kind (an ``IntegrityError`` for a
foreign key), as the Core path would raise it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Table, exc
from sqlalchemy.engine import Dialect

from control.store import lifecycle
from control.store import records as rec

_Convert = Callable[[Any], Any] | None
_RECORD_FIELDS = tuple(rec.RequestRecord.__dataclass_fields__)


class _Table:
    """INSERT ... ON CONFLICT DO NOTHING text and the value converters of one table."""

    def __init__(self, table: Table, dialect: Dialect) -> None:
        self.name = table.name
        self.quote = dialect.identifier_preparer.quote
        self.bind: dict[str, _Convert] = {
            c.name: c.type.dialect_impl(dialect).bind_processor(dialect) for c in table.columns
        }
        self.result: dict[str, _Convert] = {
            c.name: c.type.dialect_impl(dialect).result_processor(dialect, None)
            for c in table.columns
        }
        self._inserts: dict[tuple[str, ...], tuple[str, tuple[tuple[str, _Convert], ...]]] = {}

    def insert(self, columns: tuple[str, ...]) -> tuple[str, tuple[tuple[str, _Convert], ...]]:
        """The insert of ``columns`` and their converters (cached per column set); a row that
        breaks a unique constraint is skipped (rowcount 0)."""
        built = self._inserts.get(columns)
        if built is None:
            names = ", ".join(self.quote(c) for c in columns)
            marks = ", ".join("?" for _ in columns)
            sql = (f"INSERT INTO {self.quote(self.name)} ({names}) VALUES ({marks}) "
                   "ON CONFLICT DO NOTHING")  # fmt: skip
            built = self._inserts[columns] = (sql, tuple((c, self.bind[c]) for c in columns))
        return built


def _values(pairs: tuple[tuple[str, _Convert], ...], row: Mapping[str, Any]) -> tuple:
    return tuple([row[c] if f is None else f(row[c]) for c, f in pairs])


class SqliteDialectSql:
    """The statement texts and converters of one SQLite dialect (built once per writer)."""

    def __init__(self, dialect: Dialect) -> None:
        if dialect.name != "sqlite" or dialect.paramstyle != "qmark":
            raise ValueError(f"the raw path needs the sqlite qmark dialect, got {dialect.name}")
        self.requests = _Table(lifecycle.REQUESTS, dialect)
        self.usage = _Table(lifecycle.USAGE, dialect)
        self.inputs = _Table(lifecycle.INPUTS, dialect)
        self.steps = _Table(lifecycle.STEPS, dialect)
        q, fields = self.requests.quote, lifecycle.FINISH_FIELDS
        sets = ", ".join(f"{q(f)} = ?" for f in fields)
        open_ = ", ".join(f"'{s}'" for s in lifecycle.OPEN_STATUSES)
        self.finish = (f"UPDATE {q(self.requests.name)} SET {sets} "
                       f"WHERE {q('id')} = ? AND {q('status')} IN ({open_})")  # fmt: skip
        self.finish_pairs = tuple((f, self.requests.bind[f]) for f in (*fields, "id"))
        cols = ", ".join(q(f) for f in _RECORD_FIELDS)
        self.by_key = (f"SELECT {cols} FROM {q(self.requests.name)} "
                       f"WHERE {q('tenant_id')} = ? AND {q('idempotency_key')} = ?")  # fmt: skip
        self.read = tuple(self.requests.result[f] for f in _RECORD_FIELDS)
        self.drops = tuple(f"DELETE FROM {q(t.name)} WHERE {q('request_id')} = ?"
                           for t in (self.inputs, self.steps))  # fmt: skip


class SqliteStatements:
    """:class:`~control.store.runlog.apply.Statements` on a raw ``sqlite3`` connection whose
    transaction the caller opened (``BEGIN IMMEDIATE``) and will end."""

    def __init__(self, sql: SqliteDialectSql, conn: sqlite3.Connection) -> None:
        self.sql = sql
        self.cur = conn.cursor()

    def _run(self, text: str, params: Any) -> int:
        try:
            return self.cur.execute(text, params).rowcount
        except sqlite3.Error as err:  # the Core path's exception type, for the caller
            raise exc.DBAPIError.instance(text, params, err, sqlite3.Error) from err

    def insert_requests(self, rows: Sequence[Mapping[str, Any]]) -> set[str]:
        text, pairs = self.sql.requests.insert(tuple(sorted(rows[0])))
        return {r["id"] for r in rows if self._run(text, _values(pairs, r)) == 1}

    def requests_by_key(self, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], Any]:
        found = {}
        for key in set(keys):
            self._run(self.sql.by_key, key)
            row = self.cur.fetchone()
            if row is not None:
                values = [v if f is None else f(v) for f, v in zip(self.sql.read, row, strict=True)]
                found[key] = rec.RequestRecord(*values)
        return found

    def insert_usage(self, rows: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
        text, pairs = self.sql.usage.insert(tuple(rows[0]))
        billed = set()
        for r in rows:
            if self._run(text, _values(pairs, r)) == 1:
                billed.add((r["request_id"], r["node_id"], r["attempt"]))
        return billed

    def finish_requests(self, rows: Sequence[Mapping[str, Any]]) -> None:
        pairs = self.sql.finish_pairs
        params = [tuple([r.get(c) if f is None else f(r.get(c)) for c, f in pairs]) for r in rows]
        try:
            self.cur.executemany(self.sql.finish, params)
        except sqlite3.Error as err:
            raise exc.DBAPIError.instance(self.sql.finish, params, err, sqlite3.Error) from err

    def insert_inputs(self, rows: Sequence[Mapping[str, Any]]) -> None:
        text, pairs = self.sql.inputs.insert(tuple(sorted(rows[0])))
        for r in rows:
            self._run(text, _values(pairs, r))

    def insert_steps(self, rows: Sequence[Mapping[str, Any]]) -> None:
        text, pairs = self.sql.steps.insert(tuple(sorted(rows[0])))
        for r in rows:
            self._run(text, _values(pairs, r))

    def drop_inputs(self, request_ids: Sequence[str]) -> None:
        params = [(rid,) for rid in request_ids]
        for drop in self.sql.drops:
            try:
                self.cur.executemany(drop, params)
            except sqlite3.Error as err:
                raise exc.DBAPIError.instance(drop, params, err, sqlite3.Error) from err

    def close(self) -> None:
        self.cur.close()
