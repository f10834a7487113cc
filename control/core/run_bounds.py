"""The bound on a run's life: a run whose request has ``expires_at`` ends ``timed_out`` at that
instant if it is still going, whatever it waits for (admission of a later step, a replica that
is loading or coming back with its restarted worker, an input that never comes). Its end goes
through ``runs.finish``, so its queued steps leave their queues and its quota and concurrency
are released; steps still in flight finish on their device and their results are dropped (the
run is no longer live), so nothing of it is billed after the end.

One timer per bounded run (``Timers`` kind ``RUN_BOUND``, its id the request id), armed when
the run is admitted; a timer of a run that ended before its bound is stale and dropped.
"""

from __future__ import annotations

from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.parts import ActionLog, Queues, Runs, Timers
from control.core.runs import finish

#: The ``Timers`` kind of a run's bound.
RUN_BOUND = "run"


def arm_bound(runs: Runs, timers: Timers, request_id: str) -> None:
    """Arm the bound of ``request_id``'s run when it was admitted and has one."""
    run = runs.active.get(request_id)
    if run is not None and run.request.expires_at is not None:
        timers.arm(run.request.expires_at, RUN_BOUND, request_id)


def bound_live(runs: Runs, request_id: str) -> bool:
    """Whether the bound timer of ``request_id`` still has a run to end."""
    run = runs.active.get(request_id)
    return run is not None and not run.finished


def expire(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog,
    request_id: str, now: float,
) -> None:  # fmt: skip
    """End the run ``timed_out`` at its bound (nothing for a run that ended already)."""
    run = runs.active.get(request_id)
    if run is None or run.finished or run.request.expires_at is None:
        return
    bound = run.request.expires_at - run.started_at
    waiting = ", ".join(sorted({ref.node_id for ref in run.dag_run.live.values()})) or "nothing"
    reason = (
        f"timed out: the run did not finish within its bound of {bound:.1f} s "
        f"(still waiting for {waiting})"
    )
    finish(pol, runs, cluster, queues, log, run, "timed_out", reason, reason, now)
