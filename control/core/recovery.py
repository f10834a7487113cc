"""Proactive lineage recovery: when the core learns that a device is down, the runs that still
need outputs held only there recompute them at once (``lineage.on_device_down``: fresh keys,
bounded by ``CoreConfig.max_recomputes``), instead of waiting for a consumer to fail on fetch.
A consumer that still fails on fetch meanwhile parks until the recomputation is done."""

from __future__ import annotations

from control.core.actions import StepRetried
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.dag import lineage
from control.core.parts import ActionLog, Queues, Runs
from control.core.runs import add_step


def recompute_lost(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog, device_id: str,
    reason: str, now: float,
) -> int:  # fmt: skip
    """Start the recomputations of the outputs lost with ``device_id``; returns how many."""
    limit, started = pol.config.max_recomputes, 0
    for run in list(runs.active.values()):
        if run.finished:
            continue
        for ref in lineage.on_device_down(run.dag_run, device_id, limit):
            base = ref.idempotency_key.rsplit("~r", 1)[0]
            why = f"recomputing an output lost with device {device_id} ({reason})"
            log.emit(StepRetried(base, ref.key, ref.attempt, ref.idempotency_key, why))
            add_step(pol, runs, cluster, queues, run, ref, now)
            started += 1
    log.counters["lineage.proactive_recomputes"] += started
    return started
