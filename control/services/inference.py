"""Inference use case: an HTTP request becomes one run on the live runtime, recorded once.

``InferenceService.submit`` records the request (idempotency key included) and hands a new one
to ``LiveRuntime.submit_run``; a background task then settles it: the ledger gets one entry per
executed step (``record_usage`` is idempotent per request, node and attempt, so a step is never
billed twice), and the request row moves to its terminal status with the result or the error.
A repeated idempotency key is answered from the first request: it is neither run nor billed
again, and ``wait`` returns the first run's record once it has settled.

Database calls run in one writer thread, off the event loop: the runtime and the API share the
loop, and a single writer keeps SQLite free of lock contention.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from control.core.types import Request
from control.runtime.types import RunHandle, RunRequest, RunResult, StreamDelta, UsageRecord
from control.services import Services
from control.services.errors import DomainError, NotFound
from control.services.requests import TERMINAL
from control.store import records as rec

log = logging.getLogger(__name__)
T = TypeVar("T")

ACTOR = "gateway"
#: Retries of an idempotency key whose requests were refused by admission.
MAX_KEY_RETRIES = 50
#: How often a run of another process is looked up while waiting for it.
POLL_S = 0.25
#: Runtime statuses -> request statuses (a preempted or timed-out run failed for its caller).
_STATUS = {"succeeded": "succeeded", "rejected": "rejected", "failed": "failed",
           "preempted": "failed", "timed_out": "failed"}  # fmt: skip


class ServiceUnavailable(DomainError):
    """No healthy device can serve the request (or the runtime is not running)."""


@dataclass(frozen=True)
class RunCall:
    """One run as the API asks for it. ``payload`` feeds the workflow's ``input.*`` edges."""

    tenant_id: int
    tenant_name: str
    actor: str
    workflow_name: str
    workflow_version: str
    payload: Mapping[str, Any]
    body_hash: str
    idempotency_key: str | None = None
    priority_class: str | None = None
    max_output_tokens: int = 0
    session_id: str | None = None


@dataclass(frozen=True)
class Started:
    """A submitted run; ``existing`` when an idempotent retry found the first request."""

    request: rec.RequestRecord
    existing: bool


@dataclass
class _Live:
    handle: RunHandle
    done: asyncio.Event = field(default_factory=asyncio.Event)


def estimate_tokens(payload: Mapping[str, Any]) -> int:
    """Admission's estimate of input tokens (about 4 characters a token). The ledger bills
    the real tokenizer's counts that the executor reports; this only sizes admission."""
    chars = 0
    for value in payload.values():
        if isinstance(value, str):
            chars += len(value)
        elif isinstance(value, list | tuple):
            chars += sum(len(v) for v in value if isinstance(v, str))
    return chars // 4 + 1


def usage_totals(usage: tuple[UsageRecord, ...]) -> dict[str, int]:
    """Integer sums of a run's billed steps, as the ledger stores them."""
    return {
        "input_tokens": sum(u.input_tokens for u in usage),
        "output_tokens": sum(u.output_tokens for u in usage),
        "device_ms": sum((u.device_us + 999) // 1000 for u in usage),
        "cost_units": sum(u.cost_units for u in usage),
    }


def jsonable(value: Any) -> Any:
    """Outputs as JSON values (tensors and arrays arrive as lists from the runtime)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


class InferenceService:
    """Runs requests on ``runtime`` (a started ``LiveRuntime``) and records them once.

    ``model_ids``/``device_ids`` map the core's names (``name:version``, ``cpu:0``) to
    database ids for the ledger. ``on_settled`` is told each settled run (metrics).
    """

    def __init__(
        self,
        services: Services,
        runtime: Any,
        *,
        model_ids: Mapping[str, int],
        device_ids: Mapping[str, int],
        on_settled: Callable[[str, rec.RequestRecord, tuple[UsageRecord, ...]], None] | None = None,
    ) -> None:
        self.services = services
        self.runtime = runtime
        self.model_ids = dict(model_ids)
        self.device_ids = dict(device_ids)
        self.on_settled = on_settled
        self.started = False
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ledger")
        self._live: dict[str, _Live] = {}
        self._tasks: set[asyncio.Task] = set()

    # ---- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None:
        await self.runtime.start()
        self.started = True

    async def stop(self) -> None:
        """Stop the runtime (unfinished runs resolve failed), settle them, stop the writer."""
        self.started = False
        await self.runtime.stop()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=10)
        self._writer.shutdown(wait=True)

    async def _db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._writer, lambda: fn(*args, **kwargs))

    # ---- health ----------------------------------------------------------------------------
    def readiness(self) -> str:
        """ "ok" when the runtime runs and at least one device is up; else why not."""
        if not self.started:
            return "runtime not started"
        if not any(d.up for d in self.runtime.snapshot().devices):
            return "no healthy device"
        return "ok"

    def require_capacity(self) -> None:
        """Raise ServiceUnavailable when no healthy device could serve a run now."""
        state = self.readiness()
        if state != "ok":
            raise ServiceUnavailable(f"cannot run requests now: {state}")

    def snapshot(self) -> Any:
        if not self.started:
            raise ServiceUnavailable("the live runtime is not running")
        return self.runtime.snapshot()

    # ---- runs ------------------------------------------------------------------------------
    async def submit(self, call: RunCall) -> Started:
        """Record the request and start its run, or find the first request of an idempotency
        key (same body) — IdempotencyConflict for a different body, ServiceUnavailable when
        nothing can serve, domain errors for unknown workflows or inactive tenants."""
        self.require_capacity()
        await self._require_runnable(call.workflow_name, call.workflow_version)
        sub = await self._record(call)
        if sub.existing:
            return Started(sub.request, existing=True)
        record = sub.request
        core_request = Request(
            request_id=record.id,
            tenant_id=call.tenant_name,
            workflow=f"{call.workflow_name}:{call.workflow_version}",
            priority_class=record.priority_class,
            session_id=call.session_id,
            prompt_tokens=estimate_tokens(call.payload),
            max_output_tokens=call.max_output_tokens,
            idempotency_key=call.idempotency_key,
        )
        live = _Live(self.runtime.submit_run(RunRequest(core_request, dict(call.payload))))
        self._live[record.id] = live
        task = asyncio.get_running_loop().create_task(self._settle(record.id, live))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return Started(record, existing=False)

    async def _record(self, call: RunCall) -> Any:
        """Record the request. A key whose request was refused by admission (429) is not
        spent: the retry the refusal asked for is recorded under the key's next retry slot
        (``key~retryN``), and a later repeat walks the chain to the latest attempt."""
        for attempt in range(MAX_KEY_RETRIES + 1):
            key = call.idempotency_key
            if key is not None and attempt:
                key = f"{key}~retry{attempt}"
            sub = await self._db(
                self.services.requests.submit,
                call.actor,
                tenant_id=call.tenant_id,
                workflow_name=call.workflow_name,
                workflow_version=call.workflow_version,
                body_hash=call.body_hash,
                priority_class=call.priority_class,
                idempotency_key=key,
            )
            if not (sub.existing and sub.request.status == "rejected"):
                return sub
        return sub  # the chain is exhausted: answer with the last refusal

    async def _require_runnable(self, name: str, version: str) -> None:
        """ServiceUnavailable for a stored workflow the live core does not have (it needs a
        model without local weights, or it was added after the runtime started)."""
        known = {w.workflow for w in self.runtime.blueprint.workflows}
        if f"{name}:{version}" in known:
            return
        stored = await self._db(self.services.workflows.by_name, name, version)
        if stored is not None and stored.status == "active":
            raise ServiceUnavailable(
                f"workflow {name}:{version} cannot run on this gateway's devices: it needs a "
                "model without local weights, or it was added after the runtime started"
            )

    def stream(self, request_id: str) -> AsyncIterator[StreamDelta] | None:
        """Token deltas of a run of this process still going (None: nothing to stream)."""
        live = self._live.get(request_id)
        return None if live is None or live.handle.done else live.handle.stream()

    async def wait(self, request_id: str, timeout_s: float) -> rec.RequestRecord:
        """The request's record once it is terminal, or as it stands after ``timeout_s``.

        A run of this process is awaited on its completion event; any other (started by
        another gateway process, or before a restart) is polled in the database."""
        record = await self._db(self.services.requests.get, request_id)
        if record.status in TERMINAL or timeout_s <= 0:
            return record
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while record.status not in TERMINAL and loop.time() < deadline:
            live = self._live.get(request_id)
            left = deadline - loop.time()
            if live is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(live.done.wait(), left)
            else:
                await asyncio.sleep(min(POLL_S, max(0.0, left)))
            record = await self._db(self.services.requests.get, request_id)
        return record

    async def _settle(self, request_id: str, live: _Live) -> None:
        """Bill the run's steps, record its end, wake its waiters. Never raises."""
        result: RunResult = await live.handle.result()
        try:
            record = await self._db(self._persist, request_id, result)
            if self.on_settled is not None:
                self.on_settled(request_id, record, result.usage)
        except Exception:  # a settle that fails must not kill the loop; the row stays open
            log.exception("could not record the end of request %s", request_id)
        finally:
            live.done.set()
            self._live.pop(request_id, None)

    def _persist(self, request_id: str, result: RunResult) -> rec.RequestRecord:
        """Ledger entries first (a failed run is billed for the steps that completed), then
        the request's terminal status."""
        for usage in result.usage:
            self._bill(usage)
        status = _STATUS.get(result.status, "failed")
        requests = self.services.requests
        if status == "rejected" and result.retry_after_s is None:
            status = "failed"  # refused by the core (not admission): nothing to retry later
        if status == "rejected":
            body = {"retry_after_s": result.retry_after_s or 1.0, "reason": result.reason}
            return requests.finish(ACTOR, request_id, "rejected", result=body, error=result.reason)
        requests.start(ACTOR, request_id)
        body = {"status": result.status, "usage": usage_totals(result.usage)}
        if status == "succeeded":
            body["outputs"] = jsonable(dict(result.outputs))
            return requests.finish(ACTOR, request_id, status, result=body)
        error = result.error or result.reason or f"run {result.status}"
        return requests.finish(ACTOR, request_id, status, result=body, error=error)

    def _bill(self, usage: UsageRecord) -> None:
        self.services.usage.record_usage(
            ACTOR,
            request_id=usage.request_id,
            node_id=usage.node_id,
            attempt=usage.attempt,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            device_ms=(usage.device_us + 999) // 1000,
            cost_units=usage.cost_units,
            model_id=self.model_ids.get(usage.model),
            device_id=self.device_ids.get(usage.device),
        )


def usage_entries(
    services: Services, *, tenant_id: int | None = None, request_id: str | None = None
) -> list[rec.UsageRecord]:
    """Ledger entries, oldest first, of one tenant and/or one request (all when neither).
    NotFound when ``request_id`` names no request (or one of another tenant)."""
    if request_id is not None:
        request = services.requests.get(request_id)
        if tenant_id is not None and request.tenant_id != tenant_id:
            raise NotFound("request", request_id)
        return services.usage.list(request_id=request_id)
    entries = services.usage.list()
    if tenant_id is None:
        return entries
    mine = {r.id for r in services.requests.list(tenant_id=tenant_id)}
    return [e for e in entries if e.request_id in mine]
