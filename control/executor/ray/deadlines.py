"""Hang deadlines of the batches running on the Ray executor's actors.

As on the local executor (:mod:`control.executor.host.handle`), a batch may run for a generous
multiple of its expected time (``hang_multiple``; its stated ``expected_ms``, else its
replica's smoothed time per item, :class:`~control.executor.host.handle.ExpectedTimes`) and
never less than ``hang_floor_s``; a batch still running past that is hung, whatever the actor's
status calls say (they run on a thread of their own, so they answer while a batch is stuck).

An actor runs its batches one at a time, in call order, so the batch it runs is the first one
sent to it that has not reported: a batch is timed from its call when the actor had nothing
else, else from the report of the batch before it (a little after the actor began it: the
deadline errs on the generous side). :class:`Deadlines` is bookkeeping only (``now`` is passed
in); on each tick the executor calls :func:`kill_hung`, which kills the actor running a batch
past its deadline and reports it lost (``Flow.lost``: that batch fails ``hang``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from control.executor.host.handle import ExpectedTimes
from control.executor.protocol import Batch, ItemResult, RunningBatch

if TYPE_CHECKING:  # the flow holds the deadlines
    from control.executor.ray.flow import Flow


def kill_hung(flow: Flow, now: float) -> None:
    """Every actor running a batch past its deadline is hung: it is killed and reported lost
    (the batch it was running fails ``hang``, the others it held ``worker_down``, both
    retriable; a fresh actor is started). Pump thread, under the executor's lock."""
    for slot in flow.slots.values():
        late = flow.deadlines.overdue(slot.device_id, now)
        if late is None or not slot.up:
            continue
        batch_id, ran, limit = late
        running = flow.deadlines.forget(slot.device_id)
        flow.kill(slot, f"batch {batch_id} has run {ran:.2f}s, past its {limit:.2f}s deadline: "
                        "hung", hung=running)  # fmt: skip


class Deadlines:
    def __init__(self, multiple: float, floor_s: float) -> None:
        self.multiple, self.floor_s = multiple, floor_s
        self.times = ExpectedTimes()
        #: device id -> the batches its actor runs now: batch id -> (since, deadline seconds)
        self._running: dict[str, dict[str, tuple[float, float]]] = {}

    def next(self, device_id: str, sent: Mapping[str, Batch], now: float) -> None:
        """``sent``: the batches called on the device's actor and not reported, in call order.
        The first of them runs now: time it from ``now`` unless it is already timed."""
        timed = self._running.setdefault(device_id, {})
        head = next(iter(sent.values()), None)
        if head is not None and head.batch_id not in timed:
            limit = self.times.deadline_s(head, self.multiple, self.floor_s)
            timed[head.batch_id] = (now, limit)

    def ended(self, device_id: str, batch: Batch, results: list[ItemResult]) -> None:
        """``batch`` reported ``results`` (or failed): no longer timed; its ok items update its
        replica's expected time."""
        self._running.get(device_id, {}).pop(batch.batch_id, None)
        self.times.record(batch.replica_id, results)

    def forget(self, device_id: str) -> set[str]:
        """The device's actor is gone: the ids of the batches it was running (no longer timed)."""
        return set(self._running.pop(device_id, {}))

    def overdue(self, device_id: str, now: float) -> tuple[str, float, float] | None:
        """The device's running batch past its deadline, as (batch id, seconds run, deadline
        seconds), or None while each is within its own."""
        late = [(since + limit, batch_id, now - since, limit)
                for batch_id, (since, limit) in self._running.get(device_id, {}).items()
                if now - since > limit]  # fmt: skip
        return min(late)[1:] if late else None

    def running(self, device_id: str, now: float) -> tuple[RunningBatch, ...]:
        """What a status shows: each running batch, how long it has run, and its deadline."""
        return tuple(RunningBatch(batch_id, max(0.0, now - since), limit)
                     for batch_id, (since, limit) in self._running.get(device_id, {}).items())  # fmt: skip
