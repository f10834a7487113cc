"""The twin's driver: SimPy events around one ``ControlCore``; it waits, records and carries out.

Loop contract (ARCHITECTURE.md section 1): at every instant where something happens (an arrival,
a batch completion, a finished load, a fleet event, a wake-up the core asked for) the driver
records all inputs due then, calls ``core.step(now)`` once, carries out the actions and re-arms
the wake-up. Inputs are callbacks at an absolute time in a ``TwinEnvironment`` (``sim/env.py``):
all of one time form one SimPy event, and the environment calls the driver's ``_settle`` (the
instant's step) right after the last of them, before observers and later instants. The driver
runs SimPy through its public API only (``env.step``, ``env.peek``, events).
Actions that complete later (dispatches, loads) schedule their completion as a new input.
A batch of a ``continuous_batching`` model joins its replica's decode loop (``SimExecutor.join``)
and may move the completions of the batches already there: each move re-schedules the batch's
completion under a new version, and the stale event, when it fires, is ignored.

The driver decides nothing: which batch runs where, what loads, who is refused all come from the
core; the executor only predicts durations. ``log`` is the decision log ((time, action) pairs)
when ``keep_log`` is set, comparable to the plain replay driver's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from control.core.actions import Action, Dispatch, LoadModel, Reject, RunFinished
from control.core.engine import ControlCore
from control.core.events import DeviceDown, DeviceUp, ReplicaLoaded
from control.core.types import DeviceSpec, Request
from sim.env import TwinEnvironment
from sim.executor import Completion, SimExecutor


@dataclass(frozen=True)
class Arrival:
    at: float
    request: Request


@dataclass(frozen=True)
class FleetEvent:
    """A device failing (``kind="down"``) or coming back (``"up"``) at ``at`` seconds. On
    recovery the replicas the placement put there are loaded again (as the actuator would)."""

    at: float
    kind: str
    device_id: str
    reason: str = "simulated failure"

    def __post_init__(self) -> None:
        if self.kind not in ("down", "up"):
            raise ValueError(f"FleetEvent.kind={self.kind!r}: 'down' or 'up'")
        if self.at < 0:
            raise ValueError(f"FleetEvent.at={self.at!r}: must be >= 0")


class Observer(Protocol):
    """Receives what happens, for reports. Called synchronously; must not touch the core."""

    def on_submit(self, req: Request, now: float) -> None: ...
    def on_dispatch(self, d: Dispatch, done: Completion, now: float) -> None: ...
    def on_complete(self, d: Dispatch, done: Completion, now: float) -> None: ...
    def on_drop(self, d: Dispatch, done: Completion, now: float) -> None:
        """A batch in flight was lost with its device (it never completes)."""
        ...

    def on_reject(self, a: Reject, now: float) -> None: ...
    def on_finish(self, a: RunFinished, now: float) -> None: ...
    def on_load(self, a: LoadModel, ready_at: float) -> None: ...
    def sample(self, core: ControlCore, now: float) -> None: ...


class TwinDriver:
    """Runs one core against one simulated executor in a ``TwinEnvironment``."""

    def __init__(
        self,
        core: ControlCore,
        executor: SimExecutor,
        *,
        observer: Observer | None = None,
        keep_log: bool = False,
    ) -> None:
        self.core = core
        self.executor = executor
        self.env = TwinEnvironment(settle=self._settle)
        self.obs = observer
        self.keep_log = keep_log
        self.log: list[tuple[float, Action]] = []
        self.steps = 0
        self._max_steps = 0
        self._step_due = False  # set by each input: the instant's ``_settle`` steps the core
        self._wake: set[float] = set()
        self._down: set[str] = set()
        self._inflight: dict[str, tuple[Dispatch, Completion]] = {}
        self._free_at: dict[str, float] = {}  # static replica -> when its last batch ends
        models = getattr(executor, "models", {})
        self._joins = frozenset(k for k, m in models.items() if m.continuous_batching)
        self._version: dict[str, int] = {}  # joined batch in flight -> its live completion

    # ----- inputs
    def _arrive(self, req: Request, now: float) -> None:
        self.core.submit(req, now)
        if self.obs is not None:
            self.obs.on_submit(req, now)
        self._step_due = True

    def _done_joined(self, batch_id: str, version: int, now: float) -> None:
        if self._version.get(batch_id) != version:
            return  # moved by a later join (or lost with its device): not this event
        del self._version[batch_id]
        d = self._inflight[batch_id][0]
        self._inflight[batch_id] = (d, self.executor.deliver(d))  # its final completion
        self._done(batch_id, now)

    def _done(self, batch_id: str, now: float) -> None:
        entry = self._inflight.pop(batch_id, None)
        if entry is None:
            return  # its device went down: the result never arrives
        d, done = entry
        self.core.complete(done.result, now)
        if self.obs is not None:
            self.obs.on_complete(d, done, now)
        self._step_due = True

    def _ingest(self, event: object, now: float) -> None:
        self.core.ingest(event, now)
        self._step_due = True

    def _fleet(self, ev: FleetEvent, spec: DeviceSpec | None, now: float) -> None:
        if ev.kind == "down":
            self._down.add(ev.device_id)
            for bid in [b for b, (d, _) in self._inflight.items() if ev.device_id in d.device_ids]:
                d, done = self._inflight.pop(bid)
                self._version.pop(bid, None)
                self._free_at.pop(d.replica_id or "", None)
                if self.obs is not None:
                    self.obs.on_drop(d, done, now)
            if self._joins:
                self.executor.lanes.device_down(ev.device_id)
            self.core.ingest(DeviceDown(ev.device_id, ev.reason), now)
        else:
            self._down.discard(ev.device_id)
            # the core restores the device's replicas (``control.core.restore``): its loads
            # come as ``LoadModel`` actions, as they do live
            self.core.ingest(DeviceUp(spec), now)  # type: ignore[arg-type]
        self._step_due = True

    # ----- the instant's step
    def _settle(self, now: float) -> None:
        """The environment's hook after the inputs of the instant ``now``: if any came, step
        the core once, carry out its actions and re-arm the wake-up."""
        if not self._step_due:
            return  # only stale inputs (a moved completion, a batch lost with its device)
        self._step_due = False
        env, core = self.env, self.core
        self._wake.discard(now)
        plan = core.step(now)
        self.steps += 1
        actions, obs = plan.actions, self.obs
        if self.keep_log:  # carrying out an action never logs: the step's log comes first
            self.log.extend([(now, action) for action in actions])
        for action in actions:
            kind = type(action)
            if kind is Dispatch:
                self._dispatch(action, now)  # type: ignore[arg-type]
            elif kind is LoadModel:
                ready = now + self.executor.load_us(action) / 1e6  # type: ignore[arg-type]
                loaded = ReplicaLoaded(action.replica_id)  # type: ignore[union-attr,arg-type]
                env.call_at(ready, partial(self._ingest, loaded))
                if obs is not None:
                    obs.on_load(action, ready)  # type: ignore[arg-type]
            elif obs is not None and kind is RunFinished:
                obs.on_finish(action, now)  # type: ignore[arg-type]
            elif obs is not None and kind is Reject:
                obs.on_reject(action, now)  # type: ignore[arg-type]
        wake = core.next_wakeup(now)
        if wake is not None and wake not in self._wake:
            self._wake.add(wake)
            env.call_at(wake, self._on_wake)
        if self.steps >= self._max_steps:
            raise _StepLimit  # stop right here, as the step that reached the limit

    def _on_wake(self, _now: float) -> None:
        self._step_due = True

    def _dispatch(self, d: Dispatch, now: float) -> None:
        if d.model_key in self._joins:
            self._join(d, now)
            return
        done = self.executor.run(d)
        self._inflight[d.batch_id] = (d, done)
        start = now
        if d.replica_id is not None:
            # a batch sent ahead (dispatch ahead) waits for the one in flight: one device
            start = max(now, self._free_at.get(d.replica_id, now))
            self._free_at[d.replica_id] = start + done.duration_us / 1e6
        if self.obs is not None:
            self.obs.on_dispatch(d, done, start)
        self.env.call_at(start + done.duration_us / 1e6, partial(self._done, d.batch_id))

    def _join(self, d: Dispatch, now: float) -> None:
        """Carry out a dispatch to a continuous replica: schedule the joiner's completion and
        move those of the batches it delays (a new version each; the old events go stale)."""
        done, moves = self.executor.join(d, now)
        self._inflight[d.batch_id] = (d, done)  # as predicted now; the final one on delivery
        for bid, end in moves:
            version = self._version.get(bid, 0) + 1
            self._version[bid] = version
            # max: the engine counts whole microseconds, so an instant batch could land a
            # fraction of one before now
            at = max(end, now)
            self.env.call_at(at, partial(self._done_joined, bid, version))
        if self.obs is not None:
            self.obs.on_dispatch(d, done, now)

    # ----- running
    @property
    def events(self) -> int:
        """Inputs processed (stale ones too), observer calls and instants stepped, so far."""
        return self.env.callbacks_run + self.steps

    def run(
        self,
        arrivals: Iterable[Arrival],
        *,
        fleet_events: Iterable[FleetEvent] = (),
        until: float = 3600.0,
        max_steps: int = 10_000_000,
        sample_every_s: float | None = None,
    ) -> list[tuple[float, Action]]:
        """Replay to quiescence (or ``until`` seconds: what is due at ``until`` still runs; or
        ``max_steps`` steps: the replay stops for good right after the step that reaches it);
        returns the decision log (empty unless ``keep_log``). ``sample_every_s`` lets the
        observer read the core's snapshot periodically, after the step of that instant."""
        env = self.env
        for a in arrivals:
            env.call_at(a.at, partial(self._arrive, a.request))
        specs = {d.device_id: d for d in self.executor.devices.values()}
        for fe in fleet_events:
            env.call_at(fe.at, partial(self._fleet, fe, specs.get(fe.device_id)))
        if sample_every_s and self.obs is not None:
            self._every = sample_every_s
            env.observe_at(sample_every_s, self._sample)
        self._max_steps = max_steps
        if self.steps >= max_steps:
            return self.log
        peek, step = env.peek, env.step
        try:
            while peek() <= until:
                step()  # one instant (TwinEnvironment): its inputs, the core's step, observers
        except _StepLimit:
            pass
        return self.log

    def _sample(self, now: float) -> None:
        """Let the observer read the core; re-arm while anything else is still scheduled."""
        self.obs.sample(self.core, now)  # type: ignore[union-attr]
        if self.env.scheduled():
            self.env.observe_at(now + self._every, self._sample)


class _StepLimit(Exception):
    """Raised by the step that reaches ``max_steps``, through SimPy, to end ``run``."""
