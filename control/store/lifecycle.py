"""The requests table's lifecycle outside the run log: constants the run log's statements
share (:mod:`control.store.runlog`), and the recovery of runs an earlier process left open.

Every function works inside the caller's session and transaction and never commits.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, select, update
from sqlalchemy.orm import Session

from db import models as m

REQUESTS: Table = m.Request.__table__  # type: ignore[assignment]
USAGE: Table = m.UsageEntry.__table__  # type: ignore[assignment]
INPUTS: Table = m.RunInput.__table__  # type: ignore[assignment]
STEPS: Table = m.RunStep.__table__  # type: ignore[assignment]
#: Statuses a run may still leave; a finishing update never overwrites a terminal row.
OPEN_STATUSES = ("queued", "running")
FINISH_FIELDS = ("status", "started_at", "first_token_at", "finished_at", "result", "error")


class UnsupportedBackend(RuntimeError):
    """The database has no INSERT ... ON CONFLICT that the run log knows."""


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
