"""Plain replay driver: a heap of events, no SimPy, a simulated executor.

It runs a list of arrivals through a ``ControlCore`` exactly as a driver must: pop the next
instant, record everything due then (arrivals, batch completions, replica loads), call
``step(now)`` once, carry out the actions, re-arm the wake-up. A Dispatch completes after the
latency the latency model predicts for that batch on that device type; a LoadModel finishes
after the predicted load time. The decision log is a list of (time, action) tuples, so another
driver (the SimPy twin) can be checked for an identical log.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from control.core.actions import Action, BatchItem, Dispatch, LoadModel, StepPlan
from control.core.engine import ControlCore
from control.core.events import ReplicaLoaded, ReplicaLoadFailed
from control.core.latency import LatencyModel, service_us
from control.core.types import BatchResult, Request, StepResult

#: How long a tool step (vector search, router, segment) takes on the host.
TOOL_US = 1_000


@dataclass(frozen=True)
class Arrival:
    at: float
    request: Request


@dataclass
class SimExecutor:
    """Predicts results: fails items the ``fail`` hook names, labels routers, counts splits."""

    latency: LatencyModel
    device_types: Mapping[str, str]  # device id -> accelerator
    load_times_us: Mapping[str, int] | None = None
    fail: Callable[[BatchItem], str | None] = lambda item: None
    route_label: Callable[[BatchItem], str | None] = lambda item: None
    item_count: Callable[[BatchItem], int | None] = lambda item: None
    fail_load: Callable[[LoadModel], str | None] = lambda action: None

    def duration_us(self, d: Dispatch) -> int:
        if d.replica_id is None:
            return TOOL_US
        dt = self.device_types[d.device_ids[0]]
        longest = max(i.input_tokens for i in d.items)
        out = max(i.max_output_tokens for i in d.items)
        return service_us(self.latency, d.model_key or "", dt, len(d.items), longest, out)

    def result(self, d: Dispatch) -> BatchResult:
        items = []
        for it in d.items:
            err = self.fail(it)
            items.append(
                StepResult(
                    key=it.key,
                    ok=err is None,
                    input_tokens=it.input_tokens,
                    output_tokens=it.max_output_tokens,
                    prefix_hit_blocks=it.predicted_hit_blocks,
                    first_token=it.max_output_tokens > 0,
                    route_label=self.route_label(it),
                    item_count=self.item_count(it),
                    error=err,
                )
            )
        return BatchResult(d.batch_id, self.duration_us(d), tuple(items))

    def load_us(self, a: LoadModel) -> int:
        measured = self.latency.load_us(a.model_key, self.device_types[a.device_ids[0]])
        return measured if measured is not None else 1_000_000


class ReplayDriver:
    def __init__(
        self, core: ControlCore, executor: SimExecutor,
        on_step: Callable[[float, StepPlan], None] | None = None,
    ) -> None:  # fmt: skip
        self.on_step = on_step
        self.core = core
        self.executor = executor
        self.log: list[tuple[float, Action]] = []
        self._heap: list[tuple[float, int, str, object]] = []
        self._seq = 0
        self._wake: set[float] = set()

    def _push(self, at: float, kind: str, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, payload))

    def schedule(self, at: float, event: object) -> None:
        """Ingest a fleet/config event (e.g. PlacementChanged) at ``at`` during the replay."""
        self._push(at, "event", event)

    def run(
        self, arrivals: Iterable[Arrival], until: float = 3600.0, max_steps: int = 1_000_000
    ) -> list[tuple[float, Action]]:
        """Replay to quiescence (or ``until``); returns the decision log."""
        for a in arrivals:
            self._push(a.at, "arrival", a.request)
        steps = 0
        while self._heap and self._heap[0][0] <= until and steps < max_steps:
            now = self._heap[0][0]
            while self._heap and self._heap[0][0] == now:
                _, _, kind, payload = heapq.heappop(self._heap)
                self._record(kind, payload, now)
            self._wake.discard(now)
            plan = self.core.step(now)
            steps += 1
            if self.on_step is not None:
                self.on_step(now, plan)
            for action in plan.actions:
                self.log.append((now, action))
                self._carry_out(action, now)
            wake = self.core.next_wakeup(now)
            if wake is not None and wake not in self._wake:
                self._wake.add(wake)
                self._push(wake, "wake", None)
        return self.log

    def _record(self, kind: str, payload: object, now: float) -> None:
        if kind == "arrival":
            self.core.submit(payload, now)  # type: ignore[arg-type]
        elif kind == "done":
            self.core.complete(payload, now)  # type: ignore[arg-type]
        elif kind in ("loaded", "event"):
            self.core.ingest(payload, now)

    def _carry_out(self, action: Action, now: float) -> None:
        if isinstance(action, Dispatch):
            res = self.executor.result(action)
            self._push(now + res.device_us / 1e6, "done", res)
        elif isinstance(action, LoadModel):
            done = now + self.executor.load_us(action) / 1e6
            error = self.executor.fail_load(action)
            event = (
                ReplicaLoaded(action.replica_id)
                if error is None
                else ReplicaLoadFailed(action.replica_id, error)
            )
            self._push(done, "loaded", event)
