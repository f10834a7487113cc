"""A node's ``timeout_s`` bounds its latency, retries included.

When a step in flight reaches its node's ``timeout_s`` its attempt is abandoned, not waited
for: the retry (one of the node's ``retries``) runs at once under a fresh idempotency key
(``dag.reissue``), so the executor runs it even though the original is still in flight there
(under the node's own key it would wait for that original's result). The replica the original
hangs on is presumed busy for another ``timeout_s`` (``ReplicaRecord.presume_busy``): nothing is
sent ahead to it and routing prices its wait, so the retry goes to another replica when there is
one. The original's late result is discarded (its attempt is no longer live) and billed only if
it succeeds before the retry does (both bills go under one key; the first success is billed).
"""

from __future__ import annotations

from control.core.actions import StepRetried
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.dag.reissue import reissue
from control.core.parts import ActionLog, Queues, Runs
from control.core.runs import add_step, finish
from control.core.state import QueuedStep


def time_out(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog,
    step: QueuedStep, now: float,
) -> None:  # fmt: skip
    """``step`` (in flight) reached its node's timeout: retry it at once elsewhere under a
    fresh key, or fail its run when the node's retries are used up."""
    timeout_s = step.node.timeout_s or 0.0
    run = step.run
    runs.steps.pop(step.key, None)
    log.counters["steps.timed_out"] += 1
    batch = cluster.batches.get(step.batch_id or "")
    where = ""
    if batch is not None and batch.replica_id is not None:
        where = f" on {batch.replica_id}"
        rec = cluster.replicas.get(batch.replica_id)
        if rec is not None:
            rec.presume_busy(batch.batch_id, now + timeout_s, now)
    why = f"timed out after {timeout_s} s{where}"
    retry = reissue(run.dag_run, step.key, True, why)
    if retry is not None:
        reason = (
            f"attempt {step.ref.attempt} {why}; retried at once under a fresh key, on another "
            "replica where one is free (the late result is discarded)"
        )
        log.emit(StepRetried(step.key, retry.key, retry.attempt, retry.idempotency_key, reason,
                             "timeout"))  # fmt: skip
        add_step(pol, runs, cluster, queues, run, retry, now)
    elif run.dag_run.status == "failed":
        reason = run.dag_run.error or why
        finish(pol, runs, cluster, queues, log, run, "failed", run.dag_run.error, reason, now)
