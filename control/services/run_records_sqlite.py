"""The SQLite fast path of :func:`~control.services.run_records.apply_run_records`.

The group-commit writer's transaction is on every synchronous caller's path (the caller is
answered once the run's rows are committed). Through the ORM session and SQLAlchemy's
statement machinery one accept + bill + finish costs about a millisecond of CPU; the same
statements on the raw ``sqlite3`` connection cost about a tenth of that. This module runs them
there, with the SQL text built from the tables and every value converted by its column's own
SQLAlchemy type (``bind_processor`` of the dialect), so the stored bytes are exactly those the
session path writes (a test compares them).

Contract: :meth:`SqliteRunRecords.__call__` runs inside a transaction its caller opened on the
raw connection and either returns one outcome per operation (as ``apply_run_records`` would)
or returns ``None`` when the batch needs what only the session path does (an accept that met
an existing row: the idempotency lookup, a conflict). It raises the driver's error for a bad
row. On ``None`` or an error the caller rolls back and applies the whole batch through the
session path, so outcomes and error types are the session path's in every unusual case.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Dialect

from control.services.run_records import (
    AcceptRequest,
    BillStep,
    FinishRequest,
    Submission,
    fold_finishes,
    indices_by_kind,
    request_row,
)
from control.store import lifecycle

_Convert = Callable[[Any], Any] | None


class _Statements:
    """INSERT ... ON CONFLICT DO NOTHING / UPDATE text and value converters of one table."""

    def __init__(self, table: Table, dialect: Dialect) -> None:
        self.table = table
        self.quote = dialect.identifier_preparer.quote
        self.convert: dict[str, _Convert] = {
            c.name: c.type.dialect_impl(dialect).bind_processor(dialect) for c in table.columns
        }
        self._inserts: dict[tuple[str, ...], str] = {}
        self._converters: dict[tuple[str, ...], tuple[tuple[str, _Convert], ...]] = {}

    def insert(self, columns: tuple[str, ...]) -> str:
        """The insert of ``columns`` (cached per column set); a row that breaks a unique
        constraint is skipped (rowcount 0)."""
        sql = self._inserts.get(columns)
        if sql is None:
            names = ", ".join(self.quote(c) for c in columns)
            marks = ", ".join("?" for _ in columns)
            sql = (f"INSERT INTO {self.quote(self.table.name)} ({names}) VALUES ({marks}) "
                   "ON CONFLICT DO NOTHING")  # fmt: skip
            self._inserts[columns] = sql
        return sql

    def values(self, columns: tuple[str, ...], row: Mapping[str, Any]) -> tuple[Any, ...]:
        """``row``'s values of ``columns``, each converted by its column's processor."""
        pairs = self._converters.get(columns)
        if pairs is None:  # cached per column set, like the statement
            pairs = self._converters[columns] = tuple((c, self.convert[c]) for c in columns)
        return tuple([row[c] if f is None else f(row[c]) for c, f in pairs])


class SqliteRunRecords:
    """``apply_run_records`` for a raw ``sqlite3`` connection of ``dialect`` (see module doc)."""

    def __init__(self, dialect: Dialect) -> None:
        if dialect.name != "sqlite" or dialect.paramstyle != "qmark":
            raise ValueError(f"SqliteRunRecords needs the sqlite qmark dialect, got {dialect.name}")
        self.requests = _Statements(lifecycle.REQUESTS, dialect)
        self.usage = _Statements(lifecycle.USAGE, dialect)
        quote = self.requests.quote
        fields = lifecycle.FINISH_FIELDS
        sets = ", ".join(f"{quote(f)} = ?" for f in fields)
        open_ = ", ".join(f"'{s}'" for s in lifecycle.OPEN_STATUSES)
        self._finish_sql = (f"UPDATE {quote(lifecycle.REQUESTS.name)} SET {sets} "
                            f"WHERE {quote('id')} = ? AND {quote('status')} IN ({open_})")  # fmt: skip
        self._finish_fields = fields

    @classmethod
    def for_dialect(cls, dialect: Dialect) -> SqliteRunRecords | None:
        """The fast path for ``dialect``, or None when it is not SQLite."""
        return cls(dialect) if dialect.name == "sqlite" else None

    def __call__(self, conn: Any, ops: Sequence[Any]) -> list[Any] | None:
        outcomes: list[Any] = [None] * len(ops)
        by_kind = indices_by_kind(ops)
        folded = fold_finishes(ops, by_kind)
        ends = {f.request_id: f for f in folded.values()}
        cur = conn.cursor()
        try:
            for i in by_kind[AcceptRequest]:
                record = ops[i].record
                row = request_row(record, ends.get(record.id))
                columns = tuple(sorted(row))
                cur.execute(self.requests.insert(columns), self.requests.values(columns, row))
                if cur.rowcount != 1:
                    return None  # an existing row: the session path looks it up
                outcomes[i] = Submission(record, existing=False)
            for i in by_kind[BillStep]:
                row = ops[i].row()
                columns = tuple(row)
                cur.execute(self.usage.insert(columns), self.usage.values(columns, row))
                outcomes[i] = cur.rowcount == 1  # a step billed before (or twice here): False
            finishes = [ops[i] for i in by_kind[FinishRequest] if i not in folded]
            if finishes:
                cur.executemany(self._finish_sql, [self._finish_values(f) for f in finishes])
            for i in by_kind[FinishRequest]:
                outcomes[i] = True
        finally:
            cur.close()
        return outcomes

    def _finish_values(self, finish: FinishRequest) -> tuple[Any, ...]:
        row = finish.row()
        convert = self.requests.convert
        out = []
        for f in self._finish_fields:
            value, fn = row.get(f), convert[f]
            out.append(value if fn is None else fn(value))
        out.append(row["id"])
        return tuple(out)
