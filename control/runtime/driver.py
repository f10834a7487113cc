"""The live driver: the asyncio loop that is the ONLY code touching the ``ControlCore``.

Loop (see ARCHITECTURE.md section 1): records (arrivals, executor events, ingests, wake-ups)
are queued with ``put``; the first record of an instant schedules one turn on the event loop,
and the turn records everything queued by then with ``submit``/``complete``/``ingest`` at one
``now`` read from the driver's :class:`~control.clock.Clock` (``monotonic()``), calls
``step(now)`` once, hands the plan to the actuator and re-arms the wake-up at
``next_wakeup(now)``. The driver makes no decisions.

Driven by callbacks, not a task waiting on a queue: a turn costs one scheduled callback, where
a task costs a future, a wake-up and a task step per instant (twice per short run, on the path
of every synchronous caller).

On a synchronous caller's way from a worker's result to the answer, the loop iterations are
cut: the executor takes the turn as soon as it has read its pipes (``turn_now``), the
``after_turn`` hooks start the commit the answer waits for in the same iteration, and
bookkeeping that need not precede the answer (metrics, releases) is queued with ``later``
behind the wake-ups of the callers answered.

Everything runs on one event loop thread: ``put`` must be called from it (``put_threadsafe``
from other threads). A record the core refuses (unknown workflow, duplicate request) fails that
run only; the loop logs and goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from control.clock import SYSTEM_CLOCK, Clock
from control.core.engine import ControlCore
from control.core.errors import DuplicateRequestError, UnknownWorkflowError
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
        *,
        after_turn: list[Callable[[], None]] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.core = core
        self.clock = clock
        self.actuator = actuator
        self.completions = completions
        self.metrics = metrics
        self.on_refused = on_refused  # (request id, reason): a submit the core refused
        self.sample_every_s = sample_every_s
        self._records: deque[Record | object] = deque()
        self._turn_scheduled = False
        self._turn_handle: asyncio.Handle | None = None  # the scheduled turn (see turn_now)
        #: called, in order, at the end of every turn (loop thread; must not block): e.g. the
        #: group-commit writer starts the commit of what the turn queued (see turn_now). The
        #: list given is kept (not copied): hooks added to it later are called too.
        self.after_turn: list[Callable[[], None]] = [] if after_turn is None else after_turn
        self._later: list[tuple[Callable[..., None], tuple]] = []  # see later()
        self._in_turn = False
        self._stopped: asyncio.Future | None = None  # resolved by the turn that sees _STOP
        self.steps = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._last_sample = float("-inf")
        self._loop: asyncio.AbstractEventLoop | None = None

    # ---- feeding
    def put(self, record: Record | object) -> None:
        """Queue a record for the next instant (event-loop thread only). Records put before
        ``run`` starts wait for it."""
        self._records.append(record)
        if not self._turn_scheduled and self._loop is not None:
            self._turn_scheduled = True
            self._turn_handle = self._loop.call_soon(self._turn)

    def turn_now(self) -> None:
        """Take the turn scheduled for this instant now, not on the loop's next iteration
        (loop thread). For a source that has put everything it had and is done: the executor
        once it has read its pipes. Why: each loop iteration between a worker's result and
        the turn that settles it, and between that turn and the commit the caller waits for,
        is on the path of every synchronous call. No-op when no turn is scheduled."""
        handle = self._turn_handle
        if handle is not None:
            handle.cancel()
            self._turn()

    def later(self, fn: Callable[..., None], *args: object) -> None:
        """Call ``fn(*args)`` once the callers this turn answers have been answered (loop
        thread): for bookkeeping that need not come before an answer (metrics, releases).
        Queued behind every wake-up the turn and its ``after_turn`` hooks scheduled, so the
        woken callers' tasks take their steps (and send their responses) first; outside a
        turn, on the loop's next iteration. ``fn`` must not block; its errors are logged."""
        self._later.append((fn, args))
        if not self._in_turn and len(self._later) == 1 and self._loop is not None:
            self._loop.call_soon(self._run_later)

    def _run_later(self) -> None:
        later, self._later = self._later, []
        for fn, args in later:
            try:
                fn(*args)
            except Exception:  # bookkeeping must not stop the loop
                log.exception("deferred %r failed", fn)

    def put_threadsafe(self, record: Record) -> None:
        assert self._loop is not None, "the driver is not running"
        self._loop.call_soon_threadsafe(self.put, record)

    def stop(self) -> None:
        """End ``run`` after the records queued before this call (event-loop thread)."""
        self.put(_STOP)

    def snapshot(self):  # noqa: ANN201 - CoreSnapshot
        return self.core.snapshot()

    def devices_up(self) -> int:
        """Devices the core holds up now (cheap: for health checks)."""
        return self.core.devices_up()

    # ---- the loop
    async def run(self) -> None:
        """Serve until ``stop()``. Never raises for a bad record or a failed action."""
        self._loop = asyncio.get_running_loop()
        self._stopped = self._loop.create_future()
        if self._records and not self._turn_scheduled:
            self._turn_scheduled = True
            self._turn_handle = self._loop.call_soon(self._turn)
        try:
            await self._stopped
        finally:
            self._loop = None  # later records wait for a next run (none is scheduled)
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _turn(self) -> None:
        """One instant: record everything queued, step the core once, act, re-arm; then the
        ``after_turn`` hooks."""
        self._turn_scheduled = False
        self._turn_handle = None
        self._in_turn = True
        records, self._records = self._records, deque()
        stopping = False
        now = self.clock.monotonic()
        for record in records:
            if record is _STOP:
                stopping = True
            else:
                self._record(record, now)  # type: ignore[arg-type]
        try:
            plan = self.core.step(now)
            self.steps += 1
            self.actuator.apply(plan.actions, now)
            self._rearm(now)
            if now - self._last_sample >= self.sample_every_s:
                self._last_sample = now
                self.metrics.sample(self.core.gauges(), now)
        except Exception:  # a core bug must not kill serving: log it, keep the loop
            log.exception("the turn at %s failed", now)
        finally:
            if stopping and self._stopped is not None and not self._stopped.done():
                self._stopped.set_result(None)
        for hook in self.after_turn:
            try:
                hook()
            except Exception:  # a hook's bug must not stop the turns
                log.exception("after-turn hook %r failed", hook)
        self._in_turn = False
        if self._later:  # behind the wake-ups scheduled above: see later()
            if self._loop is not None:
                self._loop.call_soon(self._run_later)
            else:
                self._run_later()

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
            delay = max(0.0, wake - self.clock.monotonic())
            self._timer = asyncio.get_running_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        self.put(Wake())
