"""Executor events -> records for the core, usage and streamed text.

``Completions.on_event`` is called by the driver for every executor event and returns the
records (``Complete``, ``Ingest``) the driver feeds the core at the same instant. It holds the
batches in flight: an item result is matched to every batch waiting for its idempotency key
(the executor runs a key once even when a retry of it was dispatched again), and a batch is
complete when all its items are back.

Exactly-once usage: a step is billed on the first successful completion of its idempotency key
(of its node's key, for an attempt reissued under a fresh one: ``dag.reissue.billing_key``),
never for a failed attempt and never for a replayed answer. The keys billed are remembered in a
bounded window (:class:`~control.core.window.RecentKeys`, 64-bit digests, about 20 bytes a key):
for ``billed_window_s`` of the runtime's clock after billing, and in any case while their run
is active and a window after it ended (a run that ended is billed no more: its results are
dropped). When a key has fallen out of the window (or its digest met another's, p < 1e-13),
the ledger's unique ``(request, node, attempt)`` still refuses a second entry.

A worker that dies (cause ``worker_down``) or hangs (cause ``hang``) reports its items
failed-retriable and then ``WorkerDown``. The failures are held until the ``WorkerDown`` so the
core marks the device down first and retries elsewhere, not on the dead replica. The device
counts as restarting (``down``) until its ``WorkerUp``, unless the ``WorkerDown`` says the
device is gone for good (its node left a cluster): then it is down for good and ``on_gone`` is
told (the runtime marks it down in the device registry).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from control.core.dag.reissue import billing_key
from control.core.events import DeviceDown, OutputStarted, ReplicaBreakerChanged, ReplicaUnloaded
from control.core.tenancy.cost import CostModel
from control.core.types import BLOCK_TOKENS, StepResult
from control.core.window import RecentKeys
from control.executor.protocol import (
    BreakerChanged,
    DeviceInfo,
    DeviceJoined,
    ItemCompleted,
    ItemResult,
    ReplicaEvicted,
    TokenDelta,
    WorkerDown,
    WorkerUp,
)
from control.runtime import lora, mapping
from control.runtime.metrics import RuntimeMetrics
from control.runtime.state import Complete, Ingest, PendingBatch, Record, RunState
from control.runtime.timeline import TimelineBook
from control.runtime.types import KeptOutput, StreamDelta, UsageRecord, variant_note

log = logging.getLogger(__name__)

#: Failure causes that come with a ``WorkerDown`` of the item's device.
_LOST_WITH_WORKER = frozenset({"worker_down", "hang"})

#: How long (seconds) a billed key is remembered after billing, and at least after its run
#: ended: longer than any retry of a step or wait on an idempotency key (a sync wait is at most
#: 600 s), so a second success of one key inside it (a retry run again on a restarted worker,
#: which lost the executor's memory of the key) is not billed; past it the ledger's unique key
#: backs it. 245k keys a window at the soak's rate cost ~5 MB (they cost ~77 MB as strings).
BILLED_WINDOW_S = 900.0


class Completions:
    def __init__(
        self,
        runs: dict[str, RunState],
        cost: CostModel,
        metrics: RuntimeMetrics,
        usage_sink: Callable[[UsageRecord], None] | None,
        on_worker_down: Callable[[str], None],
        on_worker_up: Callable[[str], list[Record]],
        *,
        later: Callable[..., None] | None = None,
        billed_window_s: float = BILLED_WINDOW_S,
        on_joined: Callable[[DeviceInfo], list[Record]] | None = None,
        on_gone: Callable[[str], None] | None = None,
    ) -> None:
        self.runs = runs
        self.cost = cost
        self.metrics = metrics
        self.usage_sink = usage_sink
        self.on_worker_down = on_worker_down
        self.on_worker_up = on_worker_up
        self.on_joined = on_joined  # a device joined (``DeviceJoined``): records for the core
        self.on_gone = on_gone  # a device gone for good (``WorkerDown.gone``)
        self.down: set[str] = set()  # devices whose worker died and has not come back
        self.pending: dict[str, PendingBatch] = {}
        self.waiting: dict[str, list[str]] = {}  # idempotency key -> batch ids
        #: step keys billed: idempotency key -> its run (a bounded window, see the module)
        self.billed = RecentKeys(billed_window_s, keep=runs.__contains__)
        self.exec_held: set[tuple[str, str]] = set()
        self._held: dict[str, list[ItemResult]] = {}  # device -> failures before WorkerDown
        #: runs bookkeeping that need not precede the answer (metrics): ``later(fn, *args)``.
        #: At once by default; the live runtime defers it past the turn (``Driver.later``).
        self.later: Callable[..., None] = later or call_now
        self.timeline = TimelineBook(runs)  # spans of the items that come back

    # ---- registration (actuator side)
    def expect(self, batch: PendingBatch) -> None:
        """Wait for the items of a dispatched batch."""
        self.pending[batch.dispatch.batch_id] = batch
        for key in batch.items:
            self.waiting.setdefault(key, []).append(batch.dispatch.batch_id)

    def settle(self, batch_id: str, key: str, result: StepResult, now: float) -> list[Record]:
        """Record one item's result given by the runtime itself (host tool, missing input)."""
        waiting = self.waiting.get(key, [])
        if batch_id in waiting:
            waiting.remove(batch_id)
        if not waiting:
            self.waiting.pop(key, None)
        return self._add(batch_id, key, result, now)

    # ---- executor events
    def on_event(self, event: object, now: float) -> list[Record]:
        handler = self._handlers.get(type(event))
        return handler(self, event, now) if handler else []

    def _item(self, ev: ItemCompleted, now: float) -> list[Record]:
        r = ev.result
        if r.retriable and r.cause in _LOST_WITH_WORKER:
            self._held.setdefault(r.device_id, []).append(r)
            return []
        return self._result(r, now)

    def _result(self, r: ItemResult, now: float) -> list[Record]:
        if r.ok:
            self.exec_held.add((r.step.run_id, r.step.node_id))
        out: list[Record] = []
        for batch_id in self.waiting.pop(r.idempotency_key, []):
            pb = self.pending.get(batch_id)
            if pb is None:
                continue
            item = pb.items[r.idempotency_key]
            pb.device_ms = max(pb.device_ms, r.device_ms)
            if r.ok and not r.replayed:
                pb.moved_bytes += r.moved_bytes
                self._bill(pb, r, now)
            out.extend(self._add(batch_id, r.idempotency_key, _step_result(item.key, r), now))
        return out

    def _add(self, batch_id: str, key: str, result: StepResult, now: float) -> list[Record]:
        pb = self.pending.get(batch_id)
        if pb is None:
            return []
        item = pb.items[key]
        pb.results[item.key] = result
        self.timeline.step_done(pb, item, result, now)
        if not pb.complete:
            return []
        del self.pending[batch_id]
        self.timeline.batch_done(pb, now)
        d = pb.dispatch
        self.later(self.metrics.batch_done, d.model_key or d.tool or "?", pb.device,
                   len(d.items), pb.device_ms, now - pb.dispatched_at, pb.moved_bytes)  # fmt: skip
        return [Complete(pb.batch_result())]

    def first_bill(self, key: str, run_id: str, now: float) -> bool:
        """Whether ``key`` is billed now for the first time (then it is remembered). Attempts
        reissued under a fresh key (a timeout's retry, a preempted step: ``dag.reissue``) share
        their node's bill: the first of them to succeed is billed, a late one never."""
        key = billing_key(key)
        self.billed.prune(now)
        if key in self.billed:
            return False
        self.billed.add(key, now, run_id)
        return True

    def _bill(self, pb: PendingBatch, r: ItemResult, now: float) -> None:
        if not self.first_bill(r.idempotency_key, r.step.run_id, now):
            return
        run = self.runs.get(r.step.run_id)
        item = pb.items[r.idempotency_key]
        model = pb.dispatch.model_key or pb.dispatch.tool or "?"
        self.later(self.metrics.tokens, model, r.input_tokens, r.output_tokens,
                   r.prefix_hit_tokens)  # fmt: skip
        if run is None:
            return
        ttft_ms = None
        if r.first_token_ms is not None:  # queued until dispatch, then the worker's own figure
            ttft_ms = round((pb.dispatched_at - run.submitted_at) * 1000 + r.first_token_ms, 3)
            self.later(self.metrics.step_first_token, model, ttft_ms / 1000)
        rec = UsageRecord(
            request_id=r.step.run_id, tenant_id=run.request.tenant_id,
            workflow=run.request.workflow, node_id=item.node_id,
            idempotency_key=r.idempotency_key, attempt=item.attempt, model=model,
            device=r.device_id, replica=r.replica_id, input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            device_us=int(r.device_ms * 1000 / max(1, r.batch_size)),
            cost_units=self.cost.cost_units(model, r.input_tokens, r.output_tokens),
            batch_size=r.batch_size, prefix_hit_tokens=r.prefix_hit_tokens, ttft_ms=ttft_ms,
            adapter=lora.billed_name(run.sampling) if item.adapter else None,
            kept=KeptOutput(item.node_id, item.chunk, r.label, r.item_count if r.ok else None,
                            r.output) if run.durable and r.output is not None else None,
            variant_note=variant_note(item),
        )  # fmt: skip
        self.record_usage(run, rec)

    def record_usage(self, run: RunState, rec: UsageRecord) -> None:
        run.usage.append(rec)
        if self.usage_sink is not None:
            try:
                self.usage_sink(rec)
            except Exception:  # the sink is the API's; its failure must not stop the loop
                log.exception("usage sink failed for %s", rec.idempotency_key)

    def _delta(self, ev: TokenDelta, now: float) -> list[Record]:
        run = self.runs.get(ev.step.run_id)
        if run is None:
            return []
        run.handle.push(StreamDelta(ev.step.run_id, ev.step.node_id, ev.index, ev.text))
        if run.first_token_at is None:
            run.first_token_at = now
            self.metrics.first_token(run.request.workflow, now - run.submitted_at)
            return [Ingest(OutputStarted(ev.step.run_id))]
        return []

    def _down(self, ev: WorkerDown, now: float) -> list[Record]:
        log.warning("device %s down: %s (lost %s)", ev.device_id, ev.reason, ev.lost_replicas)
        self.metrics.worker_down(ev.device_id)
        reason = ev.reason
        if ev.gone:  # no worker comes back for it: it is not restarting
            self.down.discard(ev.device_id)
            reason = f"{reason} (gone for good)"
        else:
            self.down.add(ev.device_id)
        self.on_worker_down(ev.device_id)
        if ev.gone and self.on_gone is not None:
            self.on_gone(ev.device_id)
        out: list[Record] = [Ingest(DeviceDown(ev.device_id, reason))]
        for r in self._held.pop(ev.device_id, []):
            out.extend(self._result(r, now))
        return out

    def _up(self, ev: WorkerUp, now: float) -> list[Record]:
        if ev.device_id not in self.down:
            return []  # a first heartbeat at start-up: nothing was lost
        self.down.discard(ev.device_id)
        return self.on_worker_up(ev.device_id)

    def _joined(self, ev: DeviceJoined, now: float) -> list[Record]:
        return self.on_joined(ev.device) if self.on_joined is not None else []

    def _evicted(self, ev: ReplicaEvicted, now: float) -> list[Record]:
        return [Ingest(ReplicaUnloaded(ev.replica_id))]

    def _breaker(self, ev: BreakerChanged, now: float) -> list[Record]:
        """Open and closed go to the core, which routes around an open replica and times its
        probe itself (the executor's half_open needs no event: the core sends the probe)."""
        log.warning("breaker of %s is %s: %s", ev.replica_id, ev.state, ev.reason)
        self.metrics.breaker(ev.state)
        if ev.state not in ("open", "closed"):
            return []
        opened = ev.state == "open"
        return [Ingest(ReplicaBreakerChanged(ev.replica_id, opened, ev.probe_in_s, ev.reason))]

    _handlers: dict[type, Any] = {
        ItemCompleted: _item,
        TokenDelta: _delta,
        WorkerDown: _down,
        WorkerUp: _up,
        DeviceJoined: _joined,
        ReplicaEvicted: _evicted,
        BreakerChanged: _breaker,
    }


def call_now(fn: Callable[..., None], *args: Any) -> None:
    """The default ``later``: no deferral."""
    fn(*args)


def _step_result(key: str, r: ItemResult) -> StepResult:
    return StepResult(
        key=key,
        ok=r.ok,
        input_tokens=r.input_tokens,
        output_tokens=r.output_tokens,
        prefix_hit_blocks=r.prefix_hit_tokens // BLOCK_TOKENS,
        first_token=r.output_tokens > 0,
        route_label=r.label,
        item_count=r.item_count if r.ok else None,
        error=r.error,
        fault=r.cause,
        field=r.field,
        lost=mapping.lost_outputs(r.lost),
        held_on=(r.device_id, r.replica_id) if r.ok and r.replica_id else None,
    )
