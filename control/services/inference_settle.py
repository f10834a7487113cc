"""How :class:`~control.services.inference.InferenceService` records a run as it goes and
settles it when it ends.

Each step's bill is queued as the runtime reports it (or lingers with the run's accept row,
see ``LINGER_S``). A run's end is queued behind its bills (its accept row and bills share that
commit when they still linger); once committed, the final record is published (kept among the
``RECENT_RUNS`` last finished, for reads: :mod:`control.services.inference_reads`),
``on_settled`` is told, and the run's waiters are woken. Time is read from the service's
``clock``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING

from control.clock import Clock
from control.core.variants import base_of, precision_of
from control.runtime.types import RunHandle, RunResult, UsageRecord
from control.services.run_records import AcceptRequest, BillStep, FinishRequest
from control.services.run_results import RunTrace, StepTiming, device_ms, result_body
from control.store import records as rec

if TYPE_CHECKING:
    from control.services.live_catalog import LiveCatalog
    from control.services.writer import GroupCommitWriter

log = logging.getLogger("control.services.inference")

#: How long the row of a run whose caller waits for its end (and the bills behind that row)
#: may wait to share the run's final commit. A run that ends sooner is written in ONE
#: transaction (the one commit on the caller's path); a longer one has them queued after this
#: delay, so a crash keeps the billing of the steps already done.
LINGER_S = 0.05
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
    """Bills and run ends of :class:`~control.services.inference.InferenceService` (uses its
    ``_live``, ``_recent``, ``catalog``, ``writer``, ``model_ids``, ``device_ids``,
    ``on_settled`` and ``clock``)."""

    _live: dict[str, LiveRun]
    _recent: OrderedDict[str, rec.RequestRecord]
    catalog: LiveCatalog
    writer: GroupCommitWriter
    model_ids: Mapping[str, int]
    device_ids: Mapping[str, int]
    on_settled: Callable[[str, rec.RequestRecord, tuple[UsageRecord, ...]], None] | None
    clock: Clock

    def _on_usage(self, usage: UsageRecord) -> None:
        """The runtime's usage sink (loop thread, must not block): queue the step's ledger
        entry now, and note its timing for the run's per-node view."""
        live = self._live.get(usage.request_id)
        if live is not None:
            done_ms = int((self.clock.monotonic() - live.trace.accepted_at) * 1000)
            live.trace.steps.append(StepTiming(usage, done_ms))
        op = BillStep(
            request_id=usage.request_id, node_id=usage.node_id, attempt=str(usage.attempt),
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            device_ms=device_ms(usage), cost_units=usage.cost_units, recorded_at=self.clock.utcnow(),
            model_id=self.model_ids.get(base_of(usage.model)),
            device_id=self.device_ids.get(usage.device), variant=precision_of(usage.model),
            kept=kept_row(usage), adapter=usage.adapter,
        )  # fmt: skip
        if live is None or not live.writes:
            self.writer.submit(op, log_write_failure)
            return
        self._linger(live, op)  # its request row itself still waits: the bill follows it

    def _linger(self, live: LiveRun, op: AcceptRequest | BillStep) -> None:
        """Keep ``op`` for the run's final commit, queued at the latest ``LINGER_S`` from now."""
        live.writes.append(op)
        if live.write_timer is None:
            loop = asyncio.get_running_loop()
            live.write_timer = loop.call_later(LINGER_S, self._queue_writes, live)

    def _queue_writes(self, live: LiveRun) -> None:
        """Queue the run's waiting rows, in order (its linger is up, or it ended)."""
        if live.write_timer is not None:
            live.write_timer.cancel()
            live.write_timer = None
        writes, live.writes = live.writes, []
        for op in writes:
            self.writer.submit(op, log_write_failure)

    async def recorded(self, request_id: str) -> None:
        """Make sure the request's row is committed (a synchronous caller whose run outlives
        its timeout is told to look the run up)."""
        live = self._live.get(request_id)
        if live is not None:
            self._queue_writes(live)
        await self.writer.flush()

    def _on_result(self, request_id: str, live: LiveRun, result: RunResult) -> None:
        """The run ended (loop thread): queue its end after its bills (accept, bills and end
        share a commit when they still linger); ``_on_recorded`` follows the commit."""
        try:
            refs = self.catalog.output_refs(live.record.workflow_name,
                                            live.record.workflow_version)  # fmt: skip
            self._queue_writes(live)
            status, body, error = result_body(result, live.trace, refs)
            started = started_at(live.trace, self.clock) if status != "rejected" else None
            notes = [s.usage.variant_note for s in live.trace.steps if s.usage.variant_note]
            finish = FinishRequest(request_id, status, self.clock.utcnow(), body, error, started,
                                   degradations=notes or None)  # fmt: skip
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
        quality=record.quality, degradations=finish.degradations,
    )  # fmt: skip


def started_at(trace: RunTrace, clock: Clock) -> datetime | None:
    """When execution began: the first step's end less its device time (None: no step ran),
    on ``clock`` (the one ``trace`` was timed on)."""
    if not trace.steps:
        return None
    first = trace.steps[0]
    elapsed_ms = int((clock.monotonic() - trace.accepted_at) * 1000)
    ago_ms = elapsed_ms - first.done_ms + device_ms(first.usage)
    return clock.utcnow() - timedelta(milliseconds=max(0, ago_ms))


def kept_row(usage: UsageRecord) -> dict | None:
    """The ``run_steps`` row (but ``request_id``) of a durable run's step; None otherwise."""
    k = usage.kept
    if k is None:
        return None
    chunk = -1 if k.chunk is None else k.chunk
    return {"node_id": k.node_id, "chunk": chunk, "route_label": k.route_label,
            "item_count": k.item_count, "output": dict(k.output)}  # fmt: skip


def log_write_failure(future: asyncio.Future) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("run row or ledger entry not written: %s", future.exception())
