"""Value types of the live runtime: what the API hands in and what it gets back.

A :class:`RunRequest` is a core ``Request`` (metadata the core decides on) plus the payload the
steps read (query text, documents): the core never sees payloads. A :class:`RunHandle` is what
``LiveRuntime.submit_run`` returns: an awaitable :class:`RunResult` and a stream of
:class:`StreamDelta` pieces of generated text. :class:`UsageRecord` is one billed step; the usage
sink receives each exactly once (the first successful completion of an idempotency key).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from control.core.types import Request

_EMPTY: Mapping[str, Any] = MappingProxyType({})

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunRequest:
    """A workflow run: the core's request and the payload its ``input.*`` edges read."""

    request: Request
    payload: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    #: per-run sampling of its generate steps (``temperature``, ``top_p``, ``seed``)
    sampling: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    #: resumable: every step's output comes back with its result and is reported with its
    #: bill (``UsageRecord.kept``), so a restart can resume the run past it
    durable: bool = False
    #: steps completed before a restart (a resumed run): done, their outputs at hand
    completed: tuple[KeptOutput, ...] = ()

    @property
    def request_id(self) -> str:
        return self.request.request_id


@dataclass(frozen=True)
class KeptOutput:
    """A completed step of a durable run: where it is in its DAG, what the core needs to
    replay it (its route label, item count) and its output (plain values)."""

    node_id: str
    chunk: int | None
    route_label: str | None
    item_count: int | None
    output: Mapping[str, Any]


@dataclass(frozen=True)
class UsageRecord:
    """One step that ran (billed once per idempotency key, never for a failed attempt).

    ``device_us`` is this item's share of its batch's measured compute time.
    """

    request_id: str
    tenant_id: str
    workflow: str
    node_id: str
    idempotency_key: str
    attempt: int
    model: str  # model key, or the tool name for tool steps
    device: str  # device id, or "host" for host tools
    replica: str | None
    input_tokens: int
    output_tokens: int
    device_us: int
    cost_units: int
    batch_size: int
    #: a durable run's step: its output, to be recorded with this bill
    kept: KeptOutput | None = None
    #: generate: prompt tokens its replica served from a cached KV prefix
    prefix_hit_tokens: int = 0
    #: generate: ms from the run's submission to this step's first token (None: no token)
    ttft_ms: float | None = None
    #: generate: the LoRA adapter it ran with, as the tenant names it (None: none)
    adapter: str | None = None
    #: the step ran on another precision variant than its class preferred:
    #: {node, wanted, ran, kind, reason} (None: it ran on the preferred one, or no variants)
    variant_note: Mapping[str, str] | None = None


@dataclass(frozen=True)
class RunResult:
    """How a run ended. ``status``: succeeded | failed | preempted | timed_out | rejected."""

    request_id: str
    status: str
    outputs: Mapping[str, Any]
    error: str | None
    reason: str
    usage: tuple[UsageRecord, ...] = ()
    retry_after_s: float | None = None  # set for rejections
    fault: str | None = None  # failed: ``bad_input`` when the caller's input is to blame
    field: str | None = None  # then the input to blame (``inputs.text``), when known
    #: attempts abandoned for a fresh one (``RunState.reissued``): timed out, preempted
    reissued: tuple[Mapping[str, str], ...] = ()
    #: the request timeline: its steps' spans and the core's decisions (``runtime.timeline``)
    timeline: Mapping[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"


@dataclass(frozen=True)
class StreamDelta:
    """A piece of streamed text of a generate step of a run (``index`` counts per step)."""

    request_id: str
    node_id: str
    index: int
    text: str


class RunHandle:
    """What a caller holds for a submitted run: ``await handle.result()`` and
    ``async for delta in handle.stream()``. Created and resolved on the runtime's event loop.

    Every reader of ``stream()`` gets the whole stream from its first delta (the deltas are
    kept until the handle is dropped), so two SSE readers of one run both see every token."""

    def __init__(self, request_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.request_id = request_id
        self._loop = loop
        self._result: asyncio.Future[RunResult] = loop.create_future()
        self._history: list[StreamDelta] = []
        self._closed = False
        self._wake: asyncio.Future[None] = loop.create_future()
        self._on_end: list[Callable[[RunResult], None]] = []

    async def result(self) -> RunResult:
        """The run's result (waits until it ends)."""
        return await asyncio.shield(self._result)

    @property
    def done(self) -> bool:
        return self._result.done()

    def add_done_callback(self, fn: Callable[[RunResult], None]) -> None:
        """Call ``fn(result)`` on the loop when the run ends: synchronously as the runtime
        resolves it (no task to wake, no extra loop turn), or on the next loop turn when it
        has already ended. ``fn`` must not block; an exception it raises is logged."""
        if self._result.done():
            self._loop.call_soon(fn, self._result.result())
        else:
            self._on_end.append(fn)

    async def stream(self) -> AsyncIterator[StreamDelta]:
        """Token deltas in order, from the first, until the run ends. Any number of readers."""
        seen = 0
        while True:
            while seen < len(self._history):
                seen += 1
                yield self._history[seen - 1]
            if self._closed:
                return
            await asyncio.shield(self._wake)

    # ---- runtime side
    def push(self, delta: StreamDelta) -> None:
        self._history.append(delta)
        self._notify()

    def resolve(self, result: RunResult) -> None:
        """Set the result once and close the stream; later calls are ignored."""
        if self._result.done():
            return
        self._result.set_result(result)
        self._closed = True
        if not self._wake.done():  # readers see ``_closed`` and never wait again: no new one
            self._wake.set_result(None)
        callbacks, self._on_end = self._on_end, []
        for fn in callbacks:
            try:
                fn(result)
            except Exception:  # one caller's bug must not stop the runtime settling runs
                log.exception("run %s: end callback %r failed", self.request_id, fn)

    def _notify(self) -> None:
        """Wake every reader waiting for the next delta (or the end)."""
        if not self._wake.done():
            self._wake.set_result(None)
        self._wake = self._loop.create_future()


def variant_note(item: Any) -> dict[str, str] | None:
    """The run record's note of a dispatched step (``BatchItem``) that ran on another precision
    variant than its quality class preferred; None when it ran on the preferred one."""
    d = item.variant
    if d is None or d.ran == d.wanted:
        return None
    return {"node": item.node_id, "wanted": d.wanted, "ran": d.ran, "kind": d.kind,
            "reason": d.reason}  # fmt: skip
