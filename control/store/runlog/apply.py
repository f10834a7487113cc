"""One batch of run-log operations -> one outcome each, over one database kind's statements.

The outcomes (which request is new, which key was taken, which step was billed before) are
decided here, once; a database kind supplies only its four statements (:class:`Statements`):
SQLAlchemy Core for PostgreSQL (:mod:`.core_sql`), raw ``sqlite3`` for a SQLite file
(:mod:`.sqlite_sql`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from control.store import records as rec
from control.store.runlog.ops import (
    Submission,
    fold_finishes,
    indices_by_kind,
    request_row,
)


class Statements(Protocol):
    """The run log's statements on one open transaction. Each raises the database's error
    (as SQLAlchemy's exception types) for a bad row; the transaction is then rolled back by
    its owner and nothing of the batch is written."""

    def insert_requests(self, rows: Sequence[Mapping[str, Any]]) -> set[str]:
        """Insert request rows of one column set; the ids actually inserted (a row whose
        ``(tenant_id, idempotency_key)`` exists, or repeats earlier in ``rows``, is not)."""
        ...

    def requests_by_key(self, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], Any]:
        """Stored requests (as records) by ``(tenant_id, idempotency_key)``."""
        ...

    def insert_usage(self, rows: Sequence[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
        """Append ledger rows; the ``(request_id, node_id, attempt)`` keys actually inserted
        (a step billed before, or earlier in ``rows``, is not)."""
        ...

    def finish_requests(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Move the open requests named by ``rows`` (``id`` and every finish field) to their
        end; a row already terminal is left alone (the first end wins)."""
        ...

    def insert_inputs(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``run_inputs`` rows (every column but ``recorded_at``) of new requests."""
        ...

    def insert_steps(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert ``run_steps`` rows (every column but ``recorded_at``); one already there is
        left as it is."""
        ...

    def drop_inputs(self, request_ids: Sequence[str]) -> None:
        """Delete the ``run_inputs`` and ``run_steps`` rows of ended requests (none is fine)."""
        ...


def apply_ops(sql: Statements, ops: Sequence[Any]) -> list[Any]:
    """Apply ``ops`` through ``sql`` (one open transaction); one outcome per op, in the order
    given: a :class:`Submission` or the accept's ``conflict`` error, True/False (billed now /
    before) for a bill, True for a finish. Raises TypeError for an unknown operation and the
    database's error for a bad row."""
    outcomes: list[Any] = [None] * len(ops)
    accepts, bills, finishes = indices_by_kind(ops)
    folded = fold_finishes(ops, finishes, accepts)
    if accepts:
        _accept(sql, ops, accepts, outcomes, folded)
    if bills:
        billed = sql.insert_usage([ops[i].row() for i in bills])
        for i in bills:
            key = ops[i].key()
            outcomes[i] = key in billed
            billed.discard(key)  # a repeat in this batch: False
        kept = [{"request_id": ops[i].request_id, **ops[i].kept} for i in bills if ops[i].kept]
        if kept:  # a resumable run's step outputs share their bills' commit
            sql.insert_steps(kept)
    rows = [ops[i].row() for i in finishes if i not in folded]
    if rows:
        sql.finish_requests(rows)
        sql.drop_inputs([r["id"] for r in rows])
    for i in finishes:
        outcomes[i] = True
    return outcomes


def _accept(
    sql: Statements, ops: Sequence[Any], idx: list[int], outcomes: list[Any],
    folded: dict[int, Any],
) -> None:  # fmt: skip
    ends = {f.request_id: f for f in folded.values()}
    records = [ops[i].record for i in idx]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for x in records:  # one statement per column set (ended rows carry more columns)
        row = request_row(x, ends.get(x.id))
        groups.setdefault(tuple(sorted(row)), []).append(row)
    inserted: set[str] = set()
    for rows in groups.values():
        inserted |= sql.insert_requests(rows)
    keys = [(x.tenant_id, x.idempotency_key) for x in records
            if x.id not in inserted and x.idempotency_key]  # fmt: skip
    stored = sql.requests_by_key(keys) if keys else {}
    for i, record in zip(idx, records, strict=True):
        outcomes[i] = _accepted(ops[i], record, record.id in inserted, stored)
    inputs = [{"request_id": x.id, "tenant_id": x.tenant_id, **ops[i].inputs}
              for i, x in zip(idx, records, strict=True)
              if ops[i].inputs is not None and x.id in inserted and x.id not in ends]  # fmt: skip
    if inputs:  # an accept folded with its end needs no inputs: nothing is left to resume
        sql.insert_inputs(inputs)


def _accepted(op: Any, record: rec.RequestRecord, inserted: bool, stored: dict) -> Any:
    if inserted:
        return Submission(record, existing=False)
    found = stored.get((record.tenant_id, record.idempotency_key))
    if found is None:  # no key conflict: a primary-key collision, vanishingly unlikely
        return RuntimeError(f"request {record.id} was not inserted")
    if found.body_hash != record.body_hash:
        return op.conflict(found)
    return Submission(found, existing=True)
