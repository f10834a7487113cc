"""The live driver: the asyncio loop that is the ONLY code touching the ``ControlCore``.

Loop (see ARCHITECTURE.md section 1): wait for the next inbox record (arrival, executor event,
ingest, wake-up); drain every record already waiting, record them with ``submit``/``complete``/
``ingest`` at one ``now`` from ``clock.monotonic()``; call ``step(now)`` once; hand the plan to
the actuator; re-arm the wake-up at ``next_wakeup(now)``. The driver makes no decisions.

Everything runs on one event loop thread: ``put`` must be called from it (``put_threadsafe``
from other threads). A record the core refuses (unknown workflow, duplicate request) fails that
run only; the loop logs and goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from control.core.engine import ControlCore
from control.core.errors import DuplicateRequestError, UnknownWorkflowError
from control.runtime import clock
from control.runtime.actuator import Actuator
from control.runtime.completions import Completions
from control.runtime.metrics import RuntimeMetrics
from control.runtime.state import Complete, ExecEvent, Ingest, Record, Submit, Wake

log = logging.getLogger(__name__)

_STOP = object()


class Driver:
    def __init__(
        self,
        core: ControlCore,
        actuator: Actuator,
        completions: Completions,
        metrics: RuntimeMetrics,
        on_refused: Callable[[str, str], None],
        sample_every_s: float = 1.0,
    ) -> None:
        self.core = core
        self.actuator = actuator
        self.completions = completions
        self.metrics = metrics
        self.on_refused = on_refused  # (request id, reason): a submit the core refused
        self.sample_every_s = sample_every_s
        self.inbox: asyncio.Queue = asyncio.Queue()
        self.steps = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._last_sample = float("-inf")
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- feeding
    def put(self, record: Record) -> None:
        """Queue a record for the next instant (event-loop thread only)."""
        self.inbox.put_nowait(record)

    def put_threadsafe(self, record: Record) -> None:
        assert self._loop is not None, "the driver is not running"
        self._loop.call_soon_threadsafe(self.inbox.put_nowait, record)

    def stop(self) -> None:
        self.inbox.put_nowait(_STOP)

    def snapshot(self):  # noqa: ANN201 - CoreSnapshot
        return self.core.snapshot()

    def devices_up(self) -> int:
        """Devices the core holds up now (cheap: for health checks)."""
        return self.core.devices_up()

    # ---- the loop
    async def run(self) -> None:
        """Serve until ``stop()``. Never raises for a bad record or a failed action."""
        self._loop = asyncio.get_running_loop()
        while True:
            batch = [await self.inbox.get()]
            while not self.inbox.empty():
                batch.append(self.inbox.get_nowait())
            stopping = any(r is _STOP for r in batch)
            now = clock.monotonic()
            for record in batch:
                if record is not _STOP:
                    self._record(record, now)
            try:
                plan = self.core.step(now)
            except Exception:  # a core bug must not kill serving: log it, keep the loop
                log.exception("step(%s) failed", now)
                continue
            self.steps += 1
            self.actuator.apply(plan.actions, now)
            self._rearm(now)
            if now - self._last_sample >= self.sample_every_s:
                self._last_sample = now
                self.metrics.sample(self.core.gauges(), now)
            if stopping:
                break
        if self._timer is not None:
            self._timer.cancel()

    def _record(self, record: Record, now: float) -> None:
        core = self.core
        try:
            if isinstance(record, ExecEvent):
                for derived in self.completions.on_event(record.event, now):
                    self._record(derived, now)
            elif isinstance(record, Complete):
                core.complete(record.result, now)
            elif isinstance(record, Submit):
                self._submit(record, now)
            elif isinstance(record, Ingest):
                self._ingest(record, now)
            elif not isinstance(record, Wake):
                log.error("unknown record %r", record)
        except Exception:  # e.g. an unknown batch: this record only
            log.exception("could not record %r", record)

    def _submit(self, record: Submit, now: float) -> None:
        try:
            self.core.submit(record.request, now)
        except (DuplicateRequestError, UnknownWorkflowError) as err:
            self.on_refused(record.request.request_id, str(err))

    def _ingest(self, record: Ingest, now: float) -> None:
        try:
            self.core.ingest(record.event, now)
        except Exception as err:
            if record.reply is None or record.reply.done():
                raise
            record.reply.set_exception(err)
            return
        if record.reply is not None and not record.reply.done():
            record.reply.set_result(None)

    def _rearm(self, now: float) -> None:
        wake = self.core.next_wakeup(now)
        if wake == self._timer_at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = wake
        if wake is not None:
            delay = max(0.0, wake - clock.monotonic())
            self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        self.inbox.put_nowait(Wake())
