"""Inference use case: an HTTP request becomes one run on the live runtime, recorded durably.

Write path (all through one :class:`GroupCommitWriter`, no audit records: these rows are data):

1. ``submit`` writes the queued request (the database enforces the idempotency key). With a
   key it waits for that commit before the run starts (the key decides whether it runs); without
   one the run starts while the row commits, and when the caller hears only of the run's end
   (synchronous routes) the row may wait up to ``LINGER_S`` to share the end's commit. Either
   way an accepted request is durable before its caller hears of it, and its bills and end
   are queued behind it.
2. The runtime's usage sink reports each step as it ends; its ledger entry (unique per request,
   node and attempt) is queued at once, so a crash mid-run keeps the billing of the steps
   already done, and a failed run is billed for exactly its completed steps. Only while the
   request's own row still lingers (see 1) does the entry wait with it: row, bills and end
   then commit together, or all are queued ``LINGER_S`` after the run started.
3. When the run ends its terminal status, usage totals, outputs and per-node figures are queued
   after its bills (one commit for a short run); the caller is answered once that commit is done.

A repeated idempotency key is answered from the first request: it is neither run nor billed
again. Bills and run ends: :mod:`control.services.inference_settle`; reads of runs:
:mod:`control.services.inference_reads`. Time is read from the service's
:class:`~control.clock.Clock` (requests' timestamps, per-step timings).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.clock import SYSTEM_CLOCK, Clock
from control.core.types import Request
from control.runtime.types import RunRequest, UsageRecord
from control.services import Services
from control.services.errors import UnknownReference
from control.services.inference_calls import (  # re-exported: callers import them from here
    RunCall,
    ServiceUnavailable,
    Started,
    estimate_tokens,
)
from control.services.inference_cancel import CancelMixin
from control.services.inference_reads import ReadsMixin, until_ended
from control.services.inference_recovery import RESUME_MAX_AGE_S, RecoveryMixin
from control.services.inference_settle import LiveRun, SettleMixin
from control.services.live_catalog import LiveCatalog
from control.services.run_inputs import check_inputs
from control.services.run_records import AcceptRequest, Submission, spent_slot
from control.services.run_results import RunTrace
from control.store import records as rec
from control.store.runlog import GroupCommitWriter, WriterConfig

log = logging.getLogger(__name__)

__all__ = ["InferenceService", "RunCall", "ServiceUnavailable", "Started", "estimate_tokens"]

#: Retries of an idempotency key whose requests were refused by admission.
MAX_KEY_RETRIES = 50
#: Default bound (s) on a run no caller waits on with a timeout (async and stream runs):
#: the core ends it ``timed_out`` then, releasing all it holds (``LEGATO_ASYNC_RUN_TIMEOUT_S``).
ASYNC_RUN_TIMEOUT_S = 600.0
#: A sync run's caller cancels it at its timeout; the core ends it this much later in any case.
SYNC_BOUND_GRACE_S = 10.0


class InferenceService(RecoveryMixin, SettleMixin, ReadsMixin, CancelMixin):
    """Runs requests on ``runtime`` (a ``LiveRuntime``, not yet started) and records them.

    ``model_ids``/``device_ids`` map the core's names (``name:version``, ``cpu:0``) to database
    ids for the ledger. ``on_settled`` is told each settled run (metrics); it is given here,
    at construction, and not replaced after. ``recover_on_start`` resumes or fails requests left
    open by an earlier process (a single gateway per database; turn it off when several
    gateways share one); ``resume_max_age_s`` bounds the age of a run still resumed (see
    :mod:`control.services.inference_recovery`). ``clock`` is where the service reads time.
    ``async_run_timeout_s`` bounds the life of a run submitted without a timeout (see
    :func:`_bounds`).
    """

    def __init__(
        self,
        services: Services,
        runtime: Any,
        factory: sessionmaker[Session],
        *,
        model_ids: Mapping[str, int],
        device_ids: Mapping[str, int],
        on_settled: Callable[[str, rec.RequestRecord, tuple[UsageRecord, ...]], None] | None = None,
        writer: WriterConfig = WriterConfig(),
        recover_on_start: bool = True,
        resume_max_age_s: float = RESUME_MAX_AGE_S,
        clock: Clock = SYSTEM_CLOCK,
        async_run_timeout_s: float = ASYNC_RUN_TIMEOUT_S,
    ) -> None:
        if async_run_timeout_s <= 0:
            raise ValueError(f"async_run_timeout_s={async_run_timeout_s!r}: must be > 0")
        self.async_run_timeout_s = async_run_timeout_s
        self.services = services
        self.clock = clock
        self.runtime = runtime
        self.factory = factory
        self.model_ids = dict(model_ids)
        self.device_ids = dict(device_ids)
        self.on_settled = on_settled
        self.recover_on_start = recover_on_start
        self.resume_max_age_s = resume_max_age_s
        self.catalog = LiveCatalog.of(runtime.blueprint)
        self.writer = GroupCommitWriter(factory, writer)
        self.started = False
        self.recovered: list[str] = []  # failed by the restart
        self.resumed: list[str] = []
        self._reopened: dict[str, tuple] = {}  # see RecoveryMixin._reopen
        self._live: dict[str, LiveRun] = {}
        self._recent: OrderedDict[str, rec.RequestRecord] = OrderedDict()

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        """Start the writer, requeue or fail the requests an earlier process left open, start
        the runtime, then resume the requeued ones (:mod:`.inference_recovery`)."""
        self.writer.start()
        resume = []
        if self.recover_on_start:
            resume = await self.writer.run_in_db_thread(self._recover, self.clock.utcnow())
        # the commit of a turn's run ends starts as the turn ends, not a loop iteration later
        await self.runtime.start(usage_sink=self._on_usage, after_turn=(self.writer.commit_now,))
        self.started = True
        for run in resume:
            self._resume(run)

    async def stop(self) -> None:
        """Stop the runtime (unfinished runs resolve failed), settle them, flush the writer."""
        self.started = False
        await self.runtime.stop()
        settling = [until_ended(live, 10) for live in self._live.values() if not live.ended]
        if settling:
            await asyncio.gather(*settling)
        await self.writer.stop()

    # ---- health ----------------------------------------------------------------------------
    def readiness(self) -> str:
        """ "ok" when the runtime runs and at least one device is up; else why not. Cheap
        enough for every request: the core counts its devices, no snapshot is built."""
        if not self.started:
            return "runtime not started"
        return "ok" if self.runtime.devices_up() > 0 else "no healthy device"

    def require_capacity(self) -> None:
        """Raise ServiceUnavailable when no healthy device could serve a run now. A device
        whose worker is restarting counts as serving: the run waits for it (bounded by its
        deadline), so a worker restart costs callers latency, not a 503."""
        state = self.readiness()
        restarting = getattr(self.runtime, "devices_restarting", None)
        if state == "no healthy device" and restarting is not None and restarting() > 0:
            return
        if state != "ok":
            raise ServiceUnavailable(f"cannot run requests now: {state}")

    def snapshot(self) -> Any:
        if not self.started:
            raise ServiceUnavailable("the live runtime is not running")
        return self.runtime.snapshot()

    # ---- runs ------------------------------------------------------------------------------
    async def submit(self, call: RunCall) -> Started:
        """Record the request durably and start its run, or find the first request of an
        idempotency key (same body). Raises IdempotencyConflict (different body),
        ServiceUnavailable (nothing can serve), UnknownReference (no usable workflow)."""
        self.require_capacity()
        key = f"{call.workflow_name}:{call.workflow_version}"
        if not self.catalog.has_workflow(key):
            await self._refuse_unrunnable(call.workflow_name, call.workflow_version)
        check_inputs(self.catalog.workflows[key].inputs, call.payload)  # 422 before any write
        if call.idempotency_key is None:
            return await self._start_unkeyed(call, key)
        sub = await self._record(call)
        if sub.existing:
            return Started(sub.request, existing=True)
        record = sub.request
        self._start(call, key, record, self._reopened_steps(record.id))
        return Started(record, existing=False)

    async def _start_unkeyed(self, call: RunCall, key: str) -> Started:
        """A request without an idempotency key cannot meet an earlier one, so its run starts
        while its row commits (the commit and the run overlap instead of adding up); the
        caller still hears of it only after the commit, and its bills and end are queued
        behind the row, so every foreign key holds. If the row cannot be written the run is
        left to finish unrecorded and the caller gets the error. With ``announce_at_end`` the
        row lingers to share the run's final commit (the caller hears of the run only then)."""
        op = self._accept_op(call, call.idempotency_key)
        if call.announce_at_end:
            live = self._start(call, key, op.record)
            self._linger(live, op)
            return Started(op.record, existing=False)
        committed = self.writer.submit(op)
        self._start(call, key, op.record)
        sub = await committed
        return Started(sub.request, existing=False)

    def _start(
        self, call: RunCall, key: str, record: rec.RequestRecord, completed: tuple = ()
    ) -> LiveRun:
        """Hand the recorded request to the runtime and settle it when it ends; an async run
        is durable (its steps' outputs are kept), ``completed`` a resumed run's done steps."""
        deadline, expires_at = _bounds(self.runtime, call.timeout_s, self.async_run_timeout_s)
        core_request = Request(
            request_id=record.id,
            tenant_id=call.tenant_name,
            workflow=key,
            priority_class=record.priority_class,
            session_id=call.session_id,
            prompt_tokens=call.prompt_tokens or estimate_tokens(call.payload),
            prefix_blocks=call.prefix_blocks,
            max_output_tokens=call.max_output_tokens,
            idempotency_key=call.idempotency_key,
            deadline=deadline, expires_at=expires_at, quality=record.quality,
        )  # fmt: skip
        trace = RunTrace(accepted_at=self.clock.monotonic())
        run = RunRequest(core_request, dict(call.payload), dict(call.sampling),
                         durable=not call.announce_at_end, completed=completed)  # fmt: skip
        live = LiveRun(self.runtime.submit_run(run), record, trace)
        self._live[record.id] = live
        # callbacks, not a task per run: each hand-over costs one loop turn, no task wake-up
        live.handle.add_done_callback(partial(self._on_result, record.id, live))
        return live

    async def _record(self, call: RunCall) -> Submission:
        """Write the request. A key whose request was refused by admission (429) is not spent:
        the retry is recorded under the key's next retry slot (``key~retryN``), and a later
        repeat walks the chain to the latest attempt; one failed by a restart
        (:func:`spent_slot`) is reopened under its own id, so no step billed before the restart
        is billed again (a different body still conflicts: the writer compares bodies first)."""
        priority = call.priority_class or self.catalog.priority_of(call.tenant_name)
        sub: Submission | None = None
        for attempt in range(MAX_KEY_RETRIES + 1):
            key = call.idempotency_key
            if key is not None and attempt:
                key = f"{key}~retry{attempt}"
            sub = await self.writer.write(self._accept_op(call, key, priority))
            if not (sub.existing and spent_slot(sub.request)):
                return sub
            if sub.request.status == "failed":  # by a restart: run again under its own id
                reopened = await self._reopen(sub.request, self._inputs(call))
                return Submission(reopened, False) if reopened else await self._record(call)
        assert sub is not None
        return sub  # the chain is exhausted: answer with the last refusal

    def _accept_op(
        self, call: RunCall, key: str | None, priority: str | None = None
    ) -> AcceptRequest:
        """The queued row of a new request (validated; raises ValidationError)."""
        return AcceptRequest.new(
            request_id=str(uuid.uuid4()), tenant_id=call.tenant_id,
            workflow_name=call.workflow_name, workflow_version=call.workflow_version,
            body_hash=call.body_hash,
            priority_class=priority or call.priority_class or self.catalog.priority_of(call.tenant_name),
            received_at=self.clock.utcnow(), idempotency_key=key, inputs=self._inputs(call),
            quality=call.quality,
        )  # fmt: skip

    def _inputs(self, call: RunCall) -> dict[str, Any]:
        """What resuming the run after a restart needs (recorded with the accept)."""
        return {"tenant_name": call.tenant_name, "idempotency_key": call.idempotency_key,
                "session_id": call.session_id, "max_output_tokens": call.max_output_tokens,
                "payload": dict(call.payload), "sampling": dict(call.sampling),
                "recorded_at": self.clock.utcnow()}  # fmt: skip

    async def _refuse_unrunnable(self, name: str, version: str) -> None:
        """The workflow is not in the live core: ServiceUnavailable for an active stored one
        (it needs a model without local weights here), UnknownReference otherwise."""
        stored = await self.writer.run_in_db_thread(self.services.workflows.by_name, name, version)
        if stored is not None and stored.status == "active":
            raise ServiceUnavailable(
                f"workflow {name}:{version} cannot run on this gateway's devices: it needs a "
                "model without local weights here, or the live core refused it"
            )
        state = "no such workflow" if stored is None else f"it is {stored.status}"
        raise UnknownReference("workflow", f"{name}@{version}", f"active workflow ({state})")


def _bounds(
    runtime: Any, timeout_s: float | None, async_timeout_s: float
) -> tuple[float | None, float | None]:
    """(deadline, expires_at) of a new run on the runtime's clock (the core's time). A caller
    waiting ``timeout_s`` gives the deadline (admission refuses a run predicted to wait
    longer) and cancels the run then; the core ends it ``SYNC_BOUND_GRACE_S`` later in any
    case. A run without a timeout (async, stream) has ``async_timeout_s`` as both: no run
    waits forever. (None, None) for a runtime without a clock (a test double)."""
    clock = getattr(runtime, "clock", None)
    if clock is None:
        return None, None
    now = float(clock.monotonic())
    if timeout_s is None:
        return now + async_timeout_s, now + async_timeout_s
    return now + timeout_s, now + timeout_s + SYNC_BOUND_GRACE_S
