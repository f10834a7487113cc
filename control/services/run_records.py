"""Request lifecycle rows and ledger entries as group-commit operations.

Three operations, applied in bulk by :func:`apply_run_records` inside one transaction of the
:class:`~control.services.writer.GroupCommitWriter`:

* :class:`AcceptRequest`: insert a queued request. With an idempotency key the database decides
  (``ON CONFLICT DO NOTHING`` on ``(tenant_id, idempotency_key)``): the outcome is a
  :class:`Submission` of the new row, of the earlier row with the same body
  (``existing=True``), or an :class:`IdempotencyConflict` for a different body.
* :class:`BillStep`: append one ledger entry, at most once per ``(request, node, attempt)``;
  the outcome says whether it was new.
* :class:`FinishRequest`: move an open request to its terminal status with its result; the
  first end wins, later ones change nothing.

These are data, not operator mutations: no audit records (admin mutations keep theirs). Within
a batch, accepts run before bills and bills before finishes; callers enqueue a run's bills
before its finish, and a request's accept commits before its run starts, so every foreign key
holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from control.services import rules as r
from control.services.errors import IdempotencyConflict, ValidationError
from control.services.usage import USAGE_RULES
from control.store import lifecycle
from control.store import records as rec
from db import vocab

TERMINAL = frozenset({"succeeded", "failed", "rejected", "cancelled"})
_ACCEPT_RULES = (
    r.positive("tenant_id"),
    r.text("idempotency_key", 200),
    r.text("body_hash", 64),
    r.text("workflow_name", 200),
    r.text("workflow_version", 64),
    r.one_of("priority_class", vocab.PRIORITY_CLASSES),
)
#: A step's ledger entry obeys the same rules as one recorded through the usage service.
_BILL_RULES = USAGE_RULES


@dataclass(frozen=True)
class Submission:
    """A recorded request; ``existing`` when an idempotent retry found an earlier one."""

    request: rec.RequestRecord
    existing: bool


@dataclass(frozen=True)
class AcceptRequest:
    """A new queued request. Build with :meth:`new` (validates every field)."""

    record: rec.RequestRecord

    @classmethod
    def new(
        cls,
        *,
        request_id: str,
        tenant_id: int,
        workflow_name: str,
        workflow_version: str,
        body_hash: str,
        priority_class: str,
        received_at: datetime,
        idempotency_key: str | None = None,
    ) -> AcceptRequest:
        values = {
            "tenant_id": tenant_id,
            "idempotency_key": idempotency_key,
            "body_hash": body_hash,
            "workflow_name": workflow_name,
            "workflow_version": workflow_version,
            "priority_class": priority_class,
        }
        for name in ("tenant_id", "body_hash", "workflow_name", "workflow_version"):
            if values[name] is None:
                raise ValidationError(name, None, "is required")
        r.validate(_ACCEPT_RULES, values)
        record = rec.RequestRecord(
            id=request_id, status="queued", received_at=received_at, started_at=None,
            first_token_at=None, finished_at=None, error=None, result=None, **values,
        )  # fmt: skip
        return cls(record)


@dataclass(frozen=True)
class BillStep:
    """One ledger entry (``attempt`` as text, so "1" and 1 share one key)."""

    request_id: str
    node_id: str
    attempt: str
    input_tokens: int
    output_tokens: int
    device_ms: int
    cost_units: int
    recorded_at: datetime
    model_id: int | None = None
    device_id: int | None = None

    def __post_init__(self) -> None:
        r.validate(_BILL_RULES, self.row())

    def row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class FinishRequest:
    """The end of a run: terminal ``status``, timestamps, the stored result and error."""

    request_id: str
    status: str
    finished_at: datetime
    result: dict[str, Any] | None = None
    error: str | None = None
    started_at: datetime | None = None
    first_token_at: datetime | None = None

    def __post_init__(self) -> None:
        if self.status not in TERMINAL:
            raise ValidationError("status", self.status, f"must be one of {sorted(TERMINAL)}")

    def row(self) -> dict[str, Any]:
        row = {k: getattr(self, k) for k in self.__dataclass_fields__}
        row["id"] = row.pop("request_id")
        return row


#: The order a batch's operations are applied in, whatever order they came in: accepts first
#: (a bill or an end needs its request's row), then bills, then ends.
OP_ORDER = {AcceptRequest: 0, BillStep: 1, FinishRequest: 2}


def indices_by_kind(ops: Sequence[Any]) -> dict[type, list[int]]:
    """Each operation kind of ``OP_ORDER`` -> the indices of ``ops`` of that kind, in order.
    Raises TypeError for anything else."""
    by_kind: dict[type, list[int]] = {kind: [] for kind in OP_ORDER}
    for i, op in enumerate(ops):
        if type(op) not in by_kind:
            raise TypeError(f"unknown run-record operation {type(op).__name__}")
        by_kind[type(op)].append(i)
    return by_kind


def apply_run_records(session: Session, ops: Sequence[Any]) -> list[Any]:
    """Apply ``ops`` in the open transaction; one outcome per op, in the order given."""
    outcomes: list[Any] = [None] * len(ops)
    by_kind = indices_by_kind(ops)
    folded = fold_finishes(ops, by_kind)
    _accept(session, ops, by_kind[AcceptRequest], outcomes, folded)
    billed = lifecycle.insert_usage(session, [ops[i].row() for i in by_kind[BillStep]])
    for i in by_kind[BillStep]:
        op = ops[i]
        outcomes[i] = (op.request_id, op.node_id, op.attempt) in billed
        billed.discard((op.request_id, op.node_id, op.attempt))  # a repeat in this batch: False
    finishes = [i for i in by_kind[FinishRequest] if i not in folded]
    lifecycle.finish_requests(session, [ops[i].row() for i in finishes])
    for i in by_kind[FinishRequest]:
        outcomes[i] = True
    return outcomes


def fold_finishes(ops: Sequence[Any], by_kind: dict[type, list[int]]) -> dict[int, Any]:
    """Finishes of requests accepted (without an idempotency key) in this same batch: their
    row is inserted already ended, one statement instead of an insert and an update. Returns
    finish index -> the FinishRequest, for the accept of the same request id."""
    accepted = {ops[i].record.id for i in by_kind[AcceptRequest]
                if ops[i].record.idempotency_key is None}  # fmt: skip
    return {i: ops[i] for i in by_kind[FinishRequest] if ops[i].request_id in accepted}


def _accept(
    session: Session, ops: Sequence[Any], idx: list[int], outcomes: list[Any],
    folded: dict[int, Any] | None = None,
) -> None:  # fmt: skip
    if not idx:
        return
    ends = {f.request_id: f for f in (folded or {}).values()}
    records = [ops[i].record for i in idx]
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for x in records:  # one executemany per column set (ended rows carry more columns)
        row = request_row(x, ends.get(x.id))
        groups.setdefault(tuple(sorted(row)), []).append(row)
    inserted: set[str] = set()
    for rows in groups.values():
        inserted |= lifecycle.insert_requests(session, rows)
    missing = [x for x in records if x.id not in inserted]
    stored = lifecycle.requests_by_key(
        session, [(x.tenant_id, x.idempotency_key) for x in missing if x.idempotency_key]
    )
    for i, record in zip(idx, records, strict=True):
        if record.id in inserted:
            outcomes[i] = Submission(record, existing=False)
            continue
        found = stored.get((record.tenant_id, record.idempotency_key))
        if found is None:  # no key conflict: a primary-key collision, vanishingly unlikely
            outcomes[i] = RuntimeError(f"request {record.id} was not inserted")
        elif found.body_hash != record.body_hash:
            outcomes[i] = IdempotencyConflict(record.idempotency_key or "", found.id)
        else:
            outcomes[i] = Submission(lifecycle.request_record(found), existing=True)


#: Columns a new request leaves unset (NULL): a JSON column would store None as JSON null.
_UNSET_ON_ACCEPT = frozenset({"started_at", "first_token_at", "finished_at", "error", "result"})


def request_row(record: rec.RequestRecord, end: FinishRequest | None = None) -> dict[str, Any]:
    """The insert row of a new request; with ``end``, already in its terminal state (only
    the end's fields that are set: None stays NULL, never JSON null)."""
    fields = rec.RequestRecord.__dataclass_fields__
    row = {k: getattr(record, k) for k in fields if k not in _UNSET_ON_ACCEPT}
    if end is not None:
        row["status"] = end.status
        row.update({k: v for k, v in end.row().items() if k in _UNSET_ON_ACCEPT and v is not None})
    return row
