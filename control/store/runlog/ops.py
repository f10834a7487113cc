"""The run log's operations: request records, their lifecycle end, usage ledger entries.

Three operations, applied in bulk by :func:`~control.store.runlog.apply.apply_ops` inside one
transaction of the :class:`~control.store.runlog.writer.GroupCommitWriter`:

* :class:`AcceptRequest`: insert a queued request. With an idempotency key the database decides
  (``ON CONFLICT DO NOTHING`` on ``(tenant_id, idempotency_key)``): the outcome is a
  :class:`Submission` of the new row, of the earlier row with the same body
  (``existing=True``), or the error :meth:`AcceptRequest.conflict` builds for a different body.
* :class:`BillStep`: append one ledger entry, at most once per ``(request, node, attempt)``;
  the outcome says whether it was new.
* :class:`FinishRequest`: move an open request to its terminal status with its result; the
  first end wins, later ones change nothing.

They are plain data: the store takes their values as given. The services build them through
subclasses that validate every field and name the domain's errors
(:mod:`control.services.run_records`). No audit records: these rows are data, not operator
mutations. Within a batch, accepts run before bills and bills before finishes; callers enqueue
a run's bills before its finish, and a request's accept commits before its run starts, so every
foreign key holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, ClassVar

from control.store import records as rec

TERMINAL = frozenset({"succeeded", "failed", "rejected", "cancelled"})


class KeyReused(Exception):
    """An idempotency key already names a request with another body (the store's own error;
    the services' operations replace it with theirs, see :meth:`AcceptRequest.conflict`)."""

    def __init__(self, idempotency_key: str, request_id: str) -> None:
        self.idempotency_key = idempotency_key
        self.request_id = request_id
        super().__init__(f"idempotency_key={idempotency_key!r} names request {request_id}")


@dataclass(frozen=True)
class Submission:
    """A recorded request; ``existing`` when an idempotent retry found an earlier one."""

    request: rec.RequestRecord
    existing: bool


@dataclass(frozen=True)
class AcceptRequest:
    """A new queued request; with ``inputs`` (the ``run_inputs`` columns but ``request_id``
    and ``tenant_id``) its run can be resumed after a restart: they are inserted in the same
    transaction as the row, only when the row is new, and deleted when the request ends."""

    KIND: ClassVar[int] = 0
    record: rec.RequestRecord
    inputs: Mapping[str, Any] | None = None

    def conflict(self, found: rec.RequestRecord) -> BaseException:
        """The outcome when the key is taken by ``found``, a request with another body."""
        return KeyReused(self.record.idempotency_key or "", found.id)


@dataclass(frozen=True)
class BillStep:
    """One ledger entry (``attempt`` as text, so "1" and 1 share one key)."""

    KIND: ClassVar[int] = 1
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
    adapter: str | None = None  # the LoRA adapter the step ran with (the tenant's name)
    #: the precision variant that ran (None: the base model; ``model_id`` is the base's)
    variant: str | None = None
    #: a resumable run's step: its ``run_steps`` row (but ``request_id``), in the same commit
    kept: Mapping[str, Any] | None = None

    def row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _BILL_FIELDS}

    def key(self) -> tuple[str, str, str]:
        return (self.request_id, self.node_id, self.attempt)


@dataclass(frozen=True)
class FinishRequest:
    """The end of a run: terminal ``status``, timestamps, the stored result and error."""

    KIND: ClassVar[int] = 2
    request_id: str
    status: str
    finished_at: datetime
    result: dict[str, Any] | None = None
    error: str | None = None
    started_at: datetime | None = None
    first_token_at: datetime | None = None
    #: steps run on another precision variant than their class preferred (None: none)
    degradations: list[Any] | None = None

    def row(self) -> dict[str, Any]:
        row = {k: getattr(self, k) for k in _FINISH_FIELDS}
        row["id"] = row.pop("request_id")
        return row


_BILL_FIELDS = tuple(f.name for f in fields(BillStep) if f.name != "kept")
_FINISH_FIELDS = tuple(f.name for f in fields(FinishRequest))


#: The operation kinds, in the order a batch applies them whatever order they came in:
#: accepts first (a bill or an end needs its request's row), then bills, then ends.
KINDS = (AcceptRequest, BillStep, FinishRequest)


def indices_by_kind(ops: Sequence[Any]) -> list[list[int]]:
    """For each kind of ``KINDS``, the indices of ``ops`` of that kind, in order. Raises
    TypeError for anything else."""
    by_kind: list[list[int]] = [[], [], []]
    for i, op in enumerate(ops):
        if not isinstance(op, KINDS):
            raise TypeError(f"unknown run-log operation {type(op).__name__}")
        by_kind[op.KIND].append(i)
    return by_kind


def fold_finishes(ops: Sequence[Any], finishes: list[int], accepts: list[int]) -> dict[int, Any]:
    """Finishes of requests accepted (without an idempotency key) in this same batch: their
    row is inserted already ended, one statement instead of an insert and an update. Returns
    finish index -> the FinishRequest, for the accept of the same request id."""
    accepted = {ops[i].record.id for i in accepts if ops[i].record.idempotency_key is None}
    return {i: ops[i] for i in finishes if ops[i].request_id in accepted}


#: Columns a new request leaves unset (NULL): a JSON column would store None as JSON null.
_UNSET_ON_ACCEPT = frozenset(
    {"started_at", "first_token_at", "finished_at", "error", "result", "degradations"}
)
_RECORD_FIELDS = tuple(rec.RequestRecord.__dataclass_fields__)


def request_row(record: rec.RequestRecord, end: FinishRequest | None = None) -> dict[str, Any]:
    """The insert row of a new request; with ``end``, already in its terminal state (only
    the end's fields that are set: None stays NULL, never JSON null)."""
    row = {k: getattr(record, k) for k in _RECORD_FIELDS if k not in _UNSET_ON_ACCEPT}
    if end is not None:
        row["status"] = end.status
        row.update({k: v for k, v in end.row().items() if k in _UNSET_ON_ACCEPT and v is not None})
    return row
