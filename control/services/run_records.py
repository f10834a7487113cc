"""The run log's operations as the services build them: every field validated, the domain's
errors for a refused one.

The operations, their outcomes and the writer that commits them live in the store
(:mod:`control.store.runlog`); these subclasses add the rules a request row and a ledger entry
obey (a :class:`~control.services.errors.ValidationError` naming the bad field, raised before
anything is queued) and report a reused idempotency key as
:class:`~control.services.errors.IdempotencyConflict`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from control.services import rules as r
from control.services.errors import IdempotencyConflict, ValidationError
from control.services.usage import USAGE_RULES
from control.store import records as rec
from control.store import runlog
from control.store.runlog import TERMINAL, Submission
from db import vocab

__all__ = [
    "RESTART_FAILURE",
    "TERMINAL",
    "AcceptRequest",
    "BillStep",
    "FinishRequest",
    "Submission",
    "spent_slot",
]

#: The error of a run an earlier process left open. It starts with "retryable:" so a client
#: can tell it from a failure of the run itself: a repeat of its idempotency key (same body)
#: runs the request again instead of replaying this failure.
RESTART_FAILURE = (
    "retryable: the gateway restarted before this run finished; completed steps stay billed; "
    "repeat the request with the same Idempotency-Key to run it again"
)


def spent_slot(found: rec.RequestRecord) -> bool:
    """Whether an idempotency key's request ``found`` leaves the key free for a new attempt:
    refused by admission (429), or failed by a restart. Any other request is the key's answer
    and is replayed, as idempotency requires."""
    if found.status == "rejected":
        return True
    return found.status == "failed" and (found.error or "").startswith(RESTART_FAILURE)


_ACCEPT_RULES = (
    r.positive("tenant_id"),
    r.text("idempotency_key", 200),
    r.text("body_hash", 64),
    r.text("workflow_name", 200),
    r.text("workflow_version", 64),
    r.one_of("priority_class", vocab.PRIORITY_CLASSES),
    r.one_of("quality", vocab.QUALITY_CLASSES),
)
#: A step's ledger entry obeys the same rules as one recorded through the usage service.
_BILL_RULES = USAGE_RULES


@dataclass(frozen=True)
class AcceptRequest(runlog.AcceptRequest):
    """A new queued request. Build with :meth:`new` (validates every field)."""

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
        inputs: Mapping[str, Any] | None = None,
        quality: str | None = None,
    ) -> AcceptRequest:
        values = {
            "tenant_id": tenant_id,
            "idempotency_key": idempotency_key,
            "body_hash": body_hash,
            "workflow_name": workflow_name,
            "workflow_version": workflow_version,
            "priority_class": priority_class,
            "quality": quality,
        }
        for name in ("tenant_id", "body_hash", "workflow_name", "workflow_version"):
            if values[name] is None:
                raise ValidationError(name, None, "is required")
        r.validate(_ACCEPT_RULES, values)
        record = rec.RequestRecord(
            id=request_id, status="queued", received_at=received_at, started_at=None,
            first_token_at=None, finished_at=None, error=None, result=None, **values,
        )  # fmt: skip
        return cls(record, inputs)

    def conflict(self, found: rec.RequestRecord) -> BaseException:
        return IdempotencyConflict(self.record.idempotency_key or "", found.id)


@dataclass(frozen=True)
class BillStep(runlog.BillStep):
    """One ledger entry (``attempt`` as text, so "1" and 1 share one key); validated."""

    def __post_init__(self) -> None:
        r.validate(_BILL_RULES, self.row())


@dataclass(frozen=True)
class FinishRequest(runlog.FinishRequest):
    """The end of a run; ``status`` must be terminal."""

    def __post_init__(self) -> None:
        if self.status not in TERMINAL:
            raise ValidationError("status", self.status, f"must be one of {sorted(TERMINAL)}")
