"""What a restarted gateway finds of the runs an earlier process left open, and how it closes
or reopens them. Every function works inside the caller's session and never commits.

A run left open is either resumed (its row goes back to ``queued`` and it runs again under its
own request id, so the ledger's ``(request, node, attempt)`` key drops every step billed
before the crash) or failed; either way the inputs of ended requests are purged, so the
``run_inputs`` table holds only what an open run still needs. The kept steps (``run_steps``)
of a run failed retryably by a restart stay until a repeat of its key reopens it (they are
handed to the rerun as done: not run, not billed again), its rerun ends, or they expire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session

from control.store import lifecycle
from control.store import records as rec

REQUESTS, INPUTS, STEPS = lifecycle.REQUESTS, lifecycle.INPUTS, lifecycle.STEPS
_RECORD_FIELDS = tuple(rec.RequestRecord.__dataclass_fields__)
_INPUT_FIELDS = ("tenant_name", "idempotency_key", "session_id", "max_output_tokens",
                 "payload", "sampling", "recorded_at")  # fmt: skip


@dataclass(frozen=True)
class OpenRun:
    """A request an earlier process left queued or running, with its recorded inputs (None
    when it has none: accepted before inputs were recorded, or written with its end)."""

    record: rec.RequestRecord
    inputs: dict[str, Any] | None
    #: its steps completed before the crash (``run_steps`` rows but ``request_id``), in the
    #: order they were recorded; empty for a run that kept none (a synchronous one)
    steps: tuple[dict[str, Any], ...] = ()


def open_runs(session: Session, *, received_before: Any) -> list[OpenRun]:
    """Every request still open that was received before ``received_before``, oldest first."""
    query = (
        select(REQUESTS, *(INPUTS.c[f].label(f"in_{f}") for f in _INPUT_FIELDS),
               INPUTS.c.request_id.label("in_request_id"))
        .outerjoin(INPUTS, (INPUTS.c.request_id == REQUESTS.c.id)
                   & (INPUTS.c.tenant_id == REQUESTS.c.tenant_id))
        .where(REQUESTS.c.status.in_(lifecycle.OPEN_STATUSES),
               REQUESTS.c.received_at < received_before)
        .order_by(REQUESTS.c.received_at)
    )  # fmt: skip
    found = []
    for row in session.execute(query):
        m = row._mapping
        record = rec.RequestRecord(**{f: m[f] for f in _RECORD_FIELDS})
        inputs = None
        if m["in_request_id"] is not None:
            inputs = {f: m[f"in_{f}"] for f in _INPUT_FIELDS}
        found.append(OpenRun(record, inputs))
    return found


def with_steps(session: Session, runs: list[OpenRun]) -> list[OpenRun]:
    """``runs`` with the steps each completed before the crash."""
    if not runs:
        return runs
    by_run = kept_steps(session, [r.record.id for r in runs])
    return [OpenRun(r.record, r.inputs, tuple(by_run.get(r.record.id, ()))) for r in runs]


def kept_steps(session: Session, request_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """The kept steps (``run_steps`` rows but ``request_id``) of each of ``request_ids``, in
    the order they were recorded."""
    by_run: dict[str, list[dict[str, Any]]] = {}
    query = (select(STEPS).where(STEPS.c.request_id.in_(request_ids))
             .order_by(STEPS.c.recorded_at, STEPS.c.node_id, STEPS.c.chunk))  # fmt: skip
    for row in session.execute(query):
        m = dict(row._mapping)
        by_run.setdefault(m.pop("request_id"), []).append(m)
    return by_run


def requeue(session: Session, request_ids: list[str]) -> None:
    """Put open requests back to ``queued`` (their run starts again from the beginning)."""
    if request_ids:
        session.execute(
            update(REQUESTS)
            .where(REQUESTS.c.id.in_(request_ids), REQUESTS.c.status.in_(lifecycle.OPEN_STATUSES))
            .values(status="queued", started_at=None, first_token_at=None)
        )


def fail(
    session: Session, request_ids: list[str], *, error: str, finished_at: Any, keep_since: Any
) -> None:
    """Fail open requests with ``error`` (a retryable one: a restart's) and drop their inputs;
    their kept steps stay for a repeat of the key (see :func:`purge_ended_inputs`)."""
    if request_ids:
        session.execute(
            update(REQUESTS)
            .where(REQUESTS.c.id.in_(request_ids), REQUESTS.c.status.in_(lifecycle.OPEN_STATUSES))
            .values(status="failed", error=error, finished_at=finished_at)
        )
    purge_ended_inputs(session, retryable=error, keep_since=keep_since)


def purge_ended_inputs(session: Session, *, retryable: str, keep_since: Any) -> None:
    """Delete the inputs and kept steps of every request that has ended (a crash between a
    run's end and its inputs' delete cannot happen, one transaction holds both; this covers
    rows of a request ended by another path, such as an operator's), except the kept steps of
    a request failed with ``retryable`` at or after ``keep_since``: a repeat of its key reruns
    it past them."""
    still_open = select(REQUESTS.c.id).where(REQUESTS.c.status.in_(lifecycle.OPEN_STATUSES))
    session.execute(delete(INPUTS).where(INPUTS.c.request_id.not_in(still_open)))
    kept = select(REQUESTS.c.id).where(
        REQUESTS.c.status.in_(lifecycle.OPEN_STATUSES)
        | ((REQUESTS.c.status == "failed") & (REQUESTS.c.error == retryable)
           & (REQUESTS.c.finished_at >= keep_since))
    )  # fmt: skip
    session.execute(delete(STEPS).where(STEPS.c.request_id.not_in(kept)))


def reopen(
    session: Session, record: rec.RequestRecord, *, error: str, inputs: dict[str, Any],
    keep_since: Any,
) -> list[dict[str, Any]] | None:  # fmt: skip
    """Put a request failed with ``error`` (a restart's) back to ``queued`` with ``inputs``
    recorded again, so it runs again under its own id (the ledger's ``(request, node,
    attempt)`` key drops every step billed before); returns its kept steps (none when it
    failed before ``keep_since``: they expired), to be handed to the rerun as done. None when
    it is not (or no longer) so failed: another retry reopened it first."""
    expired = select(REQUESTS.c.id).where(REQUESTS.c.id == record.id,
                                          REQUESTS.c.finished_at < keep_since)  # fmt: skip
    session.execute(delete(STEPS).where(STEPS.c.request_id.in_(expired)))
    done = session.execute(
        update(REQUESTS)
        .where(REQUESTS.c.id == record.id, REQUESTS.c.status == "failed",
               REQUESTS.c.error == error)
        .values(status="queued", error=None, finished_at=None, started_at=None,
                first_token_at=None, result=None)
    )  # fmt: skip
    if done.rowcount != 1:
        return None
    session.execute(delete(INPUTS).where(INPUTS.c.request_id == record.id))
    row = {"request_id": record.id, "tenant_id": record.tenant_id, **inputs}
    session.execute(insert(INPUTS).values(row))
    return kept_steps(session, [record.id]).get(record.id, [])
