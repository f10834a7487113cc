"""How :class:`~control.services.inference.InferenceService` settles runs and serves reads.

A run's end is queued behind its bills (its accept row and bills share that commit when they
still linger); once committed, the final record is published, ``on_settled`` is told, and the
run's waiters are woken. Reads of runs of this process come from memory (running, or among
the ``RECENT_RUNS`` last finished); others from the database. Kept apart from ``inference.py``
to keep modules small.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from control.clock import monotonic, utcnow
from control.runtime.types import RunHandle, RunResult, StreamDelta
from control.services.run_records import TERMINAL, AcceptRequest, BillStep, FinishRequest
from control.services.run_results import RunTrace, device_ms, result_body
from control.store import records as rec

log = logging.getLogger("control.services.inference")

#: How often a run of another process is looked up while waiting for it.
POLL_S = 0.25
#: Finished runs of this process kept in memory for ``wait``/``recent``.
RECENT_RUNS = 2048


@dataclass
class LiveRun:
    """A run of this process from its start until its end is recorded."""

    handle: RunHandle
    record: rec.RequestRecord
    trace: RunTrace
    #: the run's end is recorded (or could not be); its waiters are then woken
    ended: bool = False
    waiters: list[asyncio.Future] = field(default_factory=list)
    #: rows waiting to share the run's final commit (its accept, its bills), in order
    writes: list[AcceptRequest | BillStep] = field(default_factory=list)
    write_timer: asyncio.TimerHandle | None = None


class SettleMixin:
    """Run ends and reads of :class:`~control.services.inference.InferenceService` (uses its
    ``_live``, ``_recent``, ``catalog``, ``writer``, ``services``, ``on_settled`` and
    ``_queue_writes``)."""

    def recent(self, limit: int = 50) -> list[rec.RequestRecord]:
        """Runs of this process that finished most recently, newest first."""
        return list(reversed(self._recent.values()))[:limit]

    def stream(self, request_id: str) -> AsyncIterator[StreamDelta] | None:
        """Token deltas of a run of this process still going (None: nothing to stream)."""
        live = self._live.get(request_id)
        return None if live is None or live.handle.done else live.handle.stream()

    async def get(self, request_id: str) -> rec.RequestRecord:
        """The request as it stands (memory for runs of this process, else the database)."""
        live = self._live.get(request_id)
        if live is not None:
            return live.record
        found = self._recent.get(request_id)
        if found is not None:
            return found
        return await self.writer.run_in_db_thread(self.services.requests.get, request_id)

    async def wait(self, request_id: str, timeout_s: float) -> rec.RequestRecord:
        """The request's record once it is terminal, or as it stands after ``timeout_s``.
        A run of this process is awaited on its completion; others are polled."""
        record = await self.get(request_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while record.status not in TERMINAL and loop.time() < deadline:
            live = self._live.get(request_id)
            left = deadline - loop.time()
            if live is not None:
                await until_ended(live, left)
            else:
                await asyncio.sleep(min(POLL_S, max(0.0, left)))
            record = await self.get(request_id)
        return record

    def _on_result(self, request_id: str, live: LiveRun, result: RunResult) -> None:
        """The run ended (loop thread): queue its end after its bills (accept, bills and end
        share a commit when they still linger); ``_on_recorded`` follows the commit."""
        try:
            refs = self.catalog.output_refs(live.record.workflow_name,
                                            live.record.workflow_version)  # fmt: skip
            self._queue_writes(live)
            status, body, error = result_body(result, live.trace, refs)
            started = started_at(live.trace) if status != "rejected" else None
            finish = FinishRequest(request_id, status, utcnow(), body, error, started)
            # told as the commit is done, not a loop iteration later (see writer.submit)
            self.writer.submit(finish, partial(self._on_recorded, request_id, live, finish))
        except Exception:  # a settle that fails must not kill the loop; the row stays open
            log.exception("could not record the end of request %s", request_id)
            self._close(request_id, live)

    def _on_recorded(
        self, request_id: str, live: LiveRun, finish: FinishRequest, committed: asyncio.Future
    ) -> None:
        """The run's end is committed (or failed to be): publish it, wake its waiters, then
        tell ``on_settled`` (metrics: queued behind the waiters' wake-ups, so that it runs
        after their tasks' steps, off the caller's way)."""
        final = None
        try:
            if committed.cancelled() or committed.exception() is not None:
                raise RuntimeError(f"end not written: {committed}")
            final = ended(live.record, finish)
            self._remember(final)
        except Exception:  # the row stays open; the waiters still hear of the run
            log.exception("could not record the end of request %s", request_id)
        finally:
            self._close(request_id, live)
        if final is not None and self.on_settled is not None:
            usage = tuple(s.usage for s in live.trace.steps)
            asyncio.get_running_loop().call_soon(self._tell_settled, request_id, final, usage)

    def _tell_settled(self, request_id: str, final: rec.RequestRecord, usage: tuple) -> None:
        try:
            if self.on_settled is not None:
                self.on_settled(request_id, final, usage)
        except Exception:  # a metrics bug must not stop the loop
            log.exception("on_settled failed for request %s", request_id)

    def _close(self, request_id: str, live: LiveRun) -> None:
        self._queue_writes(live)  # nothing is lost when recording the end failed
        self._live.pop(request_id, None)
        live.ended = True
        for waiter in live.waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _remember(self, record: rec.RequestRecord) -> None:
        self._recent[record.id] = record
        while len(self._recent) > RECENT_RUNS:
            self._recent.popitem(last=False)


def ended(record: rec.RequestRecord, finish: FinishRequest) -> rec.RequestRecord:
    """``record`` as ``finish`` leaves it. Built field by field: ``dataclasses.replace``
    (which looks every field up by name first) cost half as much again, on every run's way."""
    return rec.RequestRecord(
        id=record.id, tenant_id=record.tenant_id, idempotency_key=record.idempotency_key,
        body_hash=record.body_hash, workflow_name=record.workflow_name,
        workflow_version=record.workflow_version, status=finish.status,
        priority_class=record.priority_class, received_at=record.received_at,
        started_at=finish.started_at, first_token_at=record.first_token_at,
        finished_at=finish.finished_at, error=finish.error, result=finish.result,
    )  # fmt: skip


async def until_ended(live: LiveRun, timeout_s: float) -> None:
    """Wait until ``live`` ended, at most ``timeout_s`` (one loop turn after it ends: its
    waiter is woken directly, no task or event in between)."""
    if live.ended:
        return
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    live.waiters.append(waiter)
    timer = loop.call_later(timeout_s, _wake, waiter)
    try:
        await waiter
    finally:
        timer.cancel()
        live.waiters.remove(waiter)


def _wake(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


def started_at(trace: RunTrace) -> datetime | None:
    """When execution began: the first step's end less its device time (None: no step ran)."""
    if not trace.steps:
        return None
    first = trace.steps[0]
    ago_ms = int((monotonic() - trace.accepted_at) * 1000) - first.done_ms + device_ms(first.usage)
    return utcnow() - timedelta(milliseconds=max(0, ago_ms))


def log_write_failure(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("run row or ledger entry not written: %s", future.exception())
