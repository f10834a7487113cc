"""What the request timeline needs of a run, noted as the runtime carries the run out: one span
per step attempt that came back, and the decisions the core took for the run. Never decisions.

A span's instants are milliseconds after the run's submission (the runtime's clock, the one the
core is driven by): ``ready_ms`` (the step became ready), ``enqueued_ms`` (it joined the queue
it left), ``dispatched_ms`` (its batch was formed and sent), ``end_ms`` (its result came back).
``device_ms`` is its batch's measured compute time; ``batch_wait_ms`` is the part of its wait
during which its replica was free and every member of its batch was queued: the batching policy
held the batch (the rest of the wait is queueing behind other work). What the worker's side took
beyond the compute (inputs moving in, process hops, the result coming back) is ``transfer_ms``.

Decisions (admission, routing with the best candidates' scores, steals, retries, preemptions)
are kept in order, at most ``MAX_DECISIONS`` a run and ``MAX_SPANS`` spans: a long map step
must not make its run's record grow without bound.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from control.core.actions import BatchItem, Dispatch, MoveStep, StepPreempted, StepRetried
from control.core.routing.base import RouteChoice
from control.core.types import StepResult

MAX_SPANS = 256
MAX_DECISIONS = 64

log = logging.getLogger(__name__)


@dataclass
class RunTimeline:
    """A run's spans and decisions so far (plain dicts: stored with the run as they are)."""

    spans: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0  # spans and decisions left out past the bounds

    def span(self, span: dict[str, Any]) -> None:
        if len(self.spans) < MAX_SPANS:
            self.spans.append(span)
        else:
            self.dropped += 1

    def decide(self, decision: dict[str, Any]) -> None:
        if len(self.decisions) < MAX_DECISIONS:
            self.decisions.append(decision)
        else:
            self.dropped += 1

    def as_dict(self, total_ms: float) -> dict[str, Any]:
        return {"total_ms": round(total_ms, 3), "spans": self.spans,
                "decisions": self.decisions, "dropped": self.dropped}  # fmt: skip


def run_of(step_key: str) -> str:
    """The run id of a step key ``<run id>/<node>[#chunk][~r<n>]/<attempt>``."""
    return step_key.rpartition("/")[0].rpartition("/")[0]


def node_of(step_key: str) -> str:
    return step_key.rpartition("/")[0].rpartition("/")[2].split("#")[0].split("~")[0]


def route_view(route: RouteChoice) -> dict[str, Any]:
    """A routing decision as the timeline shows it: the choice, why, the candidates' scores."""
    return {
        "replica": route.score.replica_id,
        "affinity": route.affinity,
        "reason": route.reason,
        "candidates": [
            {"replica": c.replica_id, "total_us": c.total_us, "queue_us": c.queue_us,
             "service_us": c.service_us, "transfer_us": c.transfer_us, "load_us": c.load_us,
             "saving_us": c.saving_us, "hit_blocks": c.hit_blocks}
            for c in route.candidates
        ],
    }  # fmt: skip


def _unscored(d: Dispatch) -> dict[str, Any]:
    """Where a step went without a routing score: a host tool, or a step the core bound late
    to a replica with room (its placement did not change its wait, so no replica was scored)."""
    if d.replica_id is None:
        return {"replica": None, "affinity": False, "candidates": [],
                "reason": f"host tool {d.tool}: runs on the gateway host"}  # fmt: skip
    return {"replica": d.replica_id, "affinity": False, "candidates": [],
            "reason": f"bound late to {d.replica_id}, a replica with room when its turn came "
            "(its placement changed no one's wait: nothing to score)"}  # fmt: skip


def both(
    note: Callable[[Any, float], None], act: Callable[[Any, float], None]
) -> Callable[[Any, float], None]:
    """An actuator handler that notes the action on the timeline, then carries it out (a
    failed note is logged: the timeline never stops the work)."""

    def handle(action: Any, now: float) -> None:
        try:
            note(action, now)
        except Exception:
            log.exception("could not note %r on its run's timeline", action)
        act(action, now)

    return handle


def _lane(d: Dispatch) -> str:
    """Where a batch runs, as the idle bookkeeping keys it (a replica, else its tool)."""
    return d.replica_id or d.tool or "host"


def _ms(at: float, origin: float) -> float:
    return round((at - origin) * 1000, 3)


class TimelineBook:
    """Notes spans and decisions on the runs' ``RunState.timeline`` (``runs``: run id -> a
    state with ``submitted_at`` and ``timeline``); keeps when each replica last fell idle."""

    def __init__(self, runs: dict[str, Any]) -> None:
        self.runs = runs
        self.in_flight: dict[str, int] = {}  # replica -> batches sent and not all back
        self.idle_since: dict[str, float] = {}  # replica -> when its last batch came back
        self.batch_wait: dict[str, float] = {}  # batch id -> seconds the batcher held it

    def dispatched(self, d: Dispatch, now: float) -> None:
        """A batch was formed and sent: note its hold and each item's routing decision."""
        replica = _lane(d)
        busy = self.in_flight.get(replica, 0)
        self.in_flight[replica] = busy + 1
        if d.items:
            free = now if busy else self.idle_since.get(replica, 0.0)
            joined = max(max(i.enqueued_at for i in d.items), free)
            self.batch_wait[d.batch_id] = max(0.0, now - joined)
        for item in d.items:
            run = self.runs.get(item.request_id)
            if run is None:
                continue
            if not run.timeline.decisions:  # its first step sent: the core admitted it
                run.timeline.decide({"kind": "admission", "at_ms": _ms(item.ready_at, run.submitted_at),
                                     "verdict": "admitted", "reason": "within its tenant's quota"})  # fmt: skip
            view = route_view(item.route) if item.route is not None else _unscored(d)
            run.timeline.decide({"kind": "route", "node": item.node_id, "attempt": item.attempt,
                                 "at_ms": _ms(item.enqueued_at, run.submitted_at), **view})  # fmt: skip

    def step_done(self, pb: Any, item: BatchItem, result: StepResult, now: float) -> None:
        """An item of the pending batch ``pb`` came back: its span."""
        run = self.runs.get(item.request_id)
        if run is None:
            return
        t0 = run.submitted_at
        wait = max(0.0, pb.dispatched_at - item.enqueued_at)
        device = float(pb.device_ms)
        # a host tool runs inside the turn that sent it (``now`` stands still): its measured
        # time is its span's
        took_ms = max(device, (now - pb.dispatched_at) * 1000)
        end = pb.dispatched_at + took_ms / 1000
        run.timeline.span({
            "node": item.node_id, "attempt": item.attempt, "chunk": item.chunk, "key": item.key,
            "model": pb.dispatch.model_key or pb.dispatch.tool, "device": pb.device,
            "replica": pb.replica, "batch_id": pb.dispatch.batch_id,
            "batch_size": len(pb.dispatch.items), "batch_reason": pb.dispatch.reason,
            "ready_ms": _ms(item.ready_at, t0), "enqueued_ms": _ms(item.enqueued_at, t0),
            "dispatched_ms": _ms(pb.dispatched_at, t0), "end_ms": _ms(end, t0),
            "queue_wait_ms": _ms(pb.dispatched_at, item.ready_at),
            "batch_wait_ms": round(min(wait, self.batch_wait.get(pb.dispatch.batch_id, 0.0)) * 1000, 3),
            "device_ms": round(device, 3), "transfer_ms": round(took_ms - device, 3),
            "ok": result.ok, "error": result.error,
        })  # fmt: skip

    def batch_done(self, pb: Any, now: float) -> None:
        """Every item of ``pb`` is back: its replica may now be idle."""
        replica = _lane(pb.dispatch)
        self.batch_wait.pop(pb.dispatch.batch_id, None)
        left = self.in_flight.get(replica, 1) - 1
        if left > 0:
            self.in_flight[replica] = left
            return
        self.in_flight.pop(replica, None)
        self.idle_since[replica] = now

    def moved(self, a: MoveStep, now: float) -> None:
        """A queued step moved between replicas (a steal, a re-route)."""
        self._note(a.key, {"kind": "steal", "from": a.from_replica, "to": a.to_replica,
                           "reason": a.reason}, now)  # fmt: skip

    def retried(self, a: StepRetried, now: float) -> None:
        self._note(a.failed_key, {"kind": "retry", "attempt": a.attempt, "new_key": a.new_key,
                                  "cause": a.cause or "failed", "reason": a.reason}, now)  # fmt: skip

    def preempted(self, a: StepPreempted, now: float) -> None:
        self._note(a.key, {"kind": "preempt", "new_key": a.new_key, "replica": a.replica_id,
                           "reason": a.reason}, now)  # fmt: skip

    def _note(self, step_key: str, decision: dict[str, Any], now: float) -> None:
        run = self.runs.get(run_of(step_key))
        if run is not None:
            run.timeline.decide({"node": node_of(step_key), "at_ms": _ms(now, run.submitted_at),
                                 **decision})  # fmt: skip
