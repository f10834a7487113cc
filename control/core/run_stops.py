"""Ending a run before it finishes on its own: preemption (the tenancy half reclaims its
capacity) and cancel (its caller asked). Both end the run once, through ``runs.finish``."""

from __future__ import annotations

from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.events import CancelRun
from control.core.parts import ActionLog, Queues, Runs
from control.core.runs import finish


def preempt(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog,
    request_id: str, reason: str, now: float,
) -> None:  # fmt: skip
    run = runs.active.get(request_id)
    if run is None or run.finished:
        return
    finish(pol, runs, cluster, queues, log, run, "preempted", reason, reason, now, preempted=True)


def cancel(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog, ev: CancelRun,
    now: float,
) -> None:  # fmt: skip
    """End ``ev``'s run as cancelled: queued steps dropped, steps in flight named in a
    ``Preempt`` (the executor cancels them; their results are discarded, as the steps are gone),
    quota released. A run unknown or already ended is left as it is (cancel is idempotent)."""
    run = runs.active.get(ev.request_id)
    if run is None or run.finished:
        return
    finish(pol, runs, cluster, queues, log, run, "cancelled", ev.reason, ev.reason, now, True)
