"""The phases of one ``ControlCore.step``, in ``actions.PHASES`` order.

``run_phases`` is the body of ``step``: it hands each phase the parts of the state it may read
or change (``context.CoreState``), and each phase may emit actions (tagged with ``log.phase``).
``pol`` (configuration and policies) is read by every phase. A phase with nothing to do is
skipped: each guard below is the phase's own "nothing to do" condition, so skipping changes no
decision, and a step at an instant that touched little costs little (a busy twin runs millions
of steps).
"""

from __future__ import annotations

import heapq

from control.core import canary, rollout
from control.core.autoscaler import autoscale
from control.core.batcher import arm_ahead, dispatch_tool, form_batch
from control.core.breakers import PROBE, breaker_changed, probe_due
from control.core.cluster import Cluster
from control.core.context import CoreState, Policies
from control.core.events import (
    CanaryChanged,
    CancelRun,
    DeviceDown,
    DeviceUp,
    PlacementChanged,
    ReplicaBreakerChanged,
    ReplicaLoadFailed,
)
from control.core.fleet import apply_device_up, device_down, fail_replica
from control.core.headroom_preempt import reclaim_headroom
from control.core.lifecycle import scale_to_zero
from control.core.parts import ActionLog, Catalog, Ids, Inbox, Queues, Rollouts, Runs, Timers
from control.core.queueing import bind_pending, route
from control.core.restore import restore_lost
from control.core.run_bounds import RUN_BOUND, arm_bound, expire
from control.core.run_stops import cancel, preempt
from control.core.runs import admit, fail_step, on_item_done
from control.core.stealer import steal_phase
from control.core.step_timeouts import time_out
from control.core.types import BatchResult


def run_phases(st: CoreState, now: float) -> None:
    """Make every decision due at ``now`` (the caller set ``st.now`` and emptied the log)."""
    pol, catalog, inbox, runs, cluster = st.pol, st.catalog, st.inbox, st.runs, st.cluster
    queues, rollouts, timers, ids, log = st.queues, st.rollouts, st.timers, st.ids, st.log
    log.phase = "admission"
    if inbox.submitted:
        admission(pol, catalog, inbox, runs, cluster, queues, timers, ids, log, now)
    log.phase = "completions"
    if inbox.deferred or inbox.completed:
        completions(pol, catalog, inbox, runs, cluster, queues, timers, log, now)
    log.phase = "timeouts"
    if timers.due(now):
        fire_timers(pol, runs, cluster, queues, timers, log, now)
    log.phase = "reclaims"
    reclaims(pol, runs, cluster, queues, log, now)
    log.phase = "placement"
    rolling = bool(inbox.placement_events) or rollouts.current is not None
    if rolling or pol.config.scale_to_zero_idle_s is not None:
        # otherwise nothing to roll out and nothing scales to zero
        placement(pol, catalog, inbox, cluster, queues, rollouts, timers, ids, log, now)
    if cluster.replica_caps or st.scaling.draining:  # per-model autoscaling, after rollouts
        autoscale(pol, catalog, cluster, queues, rollouts, st.scaling, ids, log, now)
    if catalog.canaries:  # a canary worse than its baseline is rolled back before routing
        canary.judge(pol, catalog, cluster, queues, log, now)
    log.phase = "loads"
    if cluster.lost:  # devices back up: their replicas first, so routing waits for them
        restore_lost(pol, cluster, ids, log, now)
    log.phase = "routing"
    if queues.ready or queues.pending:
        routing(pol, catalog, runs, cluster, queues, ids, log, now)
    log.phase = "loads"
    if queues.unplaced:
        retry_unplaced(pol, catalog, runs, cluster, queues, ids, log, now)
    log.phase = "stealing"
    if queues.dirty:
        reps = cluster.replicas
        idle = sorted(r for r in queues.dirty if r in reps and reps[r].idle)
    else:
        idle = []
    steal_phase(pol, cluster, queues, ids, log, idle, now)
    log.phase = "batching"
    if queues.tools or queues.dirty or queues.headroom_blocked or pol.config.binding.bind_ahead_us:
        batching(pol, catalog, cluster, queues, timers, ids, log, now)


def admission(
    pol: Policies, catalog: Catalog, inbox: Inbox, runs: Runs, cluster: Cluster, queues: Queues,
    timers: Timers, ids: Ids, log: ActionLog, now: float,
) -> None:  # fmt: skip
    """Admit or refuse every submitted request: takes ``inbox.submitted``; a run started adds
    to ``runs`` and its ready steps to ``queues.ready``, may preload models (``cluster``) and
    arms its bound (``timers``, when its request has ``expires_at``)."""
    submitted, inbox.submitted = inbox.submitted, []
    for req, _at in submitted:
        admit(pol, catalog, runs, cluster, queues, ids, log, req, now)
        if req.expires_at is not None:
            arm_bound(runs, timers, req.request_id)


def completions(
    pol: Policies, catalog: Catalog, inbox: Inbox, runs: Runs, cluster: Cluster, queues: Queues,
    timers: Timers, log: ActionLog, now: float,
) -> None:  # fmt: skip
    """Apply deferred fleet events (lost replicas: their steps are routed again or retried),
    then finished batches (their replicas free up, their steps advance): takes
    ``inbox.deferred`` and ``inbox.completed``."""
    deferred, inbox.deferred = inbox.deferred, []
    for ev in deferred:
        if isinstance(ev, DeviceDown):
            device_down(pol, runs, cluster, queues, log, ev.device_id, ev.reason, now)
        elif isinstance(ev, DeviceUp):  # it came back after a Down of this same step
            apply_device_up(cluster, ev.device)
        elif isinstance(ev, ReplicaBreakerChanged):
            if ev.open and catalog.canaries:
                why = f"breaker of {ev.replica_id} opened: {ev.reason or 'repeated failures'}"
                canary.on_broken(catalog, cluster, ev.replica_id, why)
            breaker_changed(pol, cluster, queues, timers, log, ev, now)
        elif isinstance(ev, CancelRun):
            cancel(pol, runs, cluster, queues, log, ev, now)
        elif isinstance(ev, ReplicaLoadFailed):
            why = f"load failed: {ev.error}"
            if catalog.canaries:
                canary.on_broken(catalog, cluster, ev.replica_id, why)
            fail_replica(pol, runs, cluster, queues, log, ev.replica_id, why, now)
        else:
            rid: str = ev.replica_id  # type: ignore[attr-defined]
            fail_replica(pol, runs, cluster, queues, log, rid, "replica unloaded", now)
    done, inbox.completed = inbox.completed, []
    for result, _at in done:
        batch_done(pol, catalog, runs, cluster, queues, timers, log, result, now)


def batch_done(
    pol: Policies, catalog: Catalog, runs: Runs, cluster: Cluster, queues: Queues, timers: Timers,
    log: ActionLog, result: BatchResult, now: float,
) -> None:  # fmt: skip
    """Free the batch's replica and advance (or retry) each of its live steps; a step that
    failed on a canary is retried on the baseline (``canary.on_result``)."""
    batch = cluster.batches.pop(result.batch_id, None)
    if batch is None:
        return
    rec = cluster.replicas.get(batch.replica_id or "")
    if rec is not None:
        rec.stop_running(result.batch_id, len(batch.items), now)
        # a batch sent ahead now runs alone: look again near its end
        arm_ahead(pol, timers, rec, now)
        queues.dirty.add(rec.replica_id)
        pol.batching.observe(rec.model, len(batch.items), result.device_us)
    reported = {r.key: r for r in result.items}
    dev = rec.device.device_id if rec else None
    for step in batch.items.values():
        if not runs.is_live(step):
            continue  # stale attempt (timed out, run ended)
        res = reported.get(step.key)
        if catalog.canaries and canary.on_result(catalog, step, res is not None and res.ok, now):
            why = f"failed on canary {step.model_key}: {res.error if res else 'no result'}"
            fail_step(pol, runs, cluster, queues, log, step, why, now, lost=True)
            continue
        at = (dev, batch.replica_id) if rec or res is None or not res.held_on else res.held_on
        on_item_done(pol, runs, cluster, queues, log, step, res, at[0], at[1], now)


def fire_timers(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, timers: Timers, log: ActionLog,
    now: float,
) -> None:  # fmt: skip
    """Fire due timers: batching deadlines and dispatch-ahead points mark their replica dirty;
    a step still in flight at its timeout is retried at once elsewhere (``step_timeouts``); a
    run still going at its bound ends ``timed_out`` (``run_bounds``)."""
    heap = timers.heap
    while heap and heap[0][0] <= now:
        _, _, kind, ident = heapq.heappop(heap)
        if kind == "batch" or kind == "ahead":
            queues.dirty.add(ident)
            continue
        if kind == RUN_BOUND:
            expire(pol, runs, cluster, queues, log, ident, now)
            continue
        if kind == PROBE:
            probe_due(cluster, queues, ident)
            continue
        step = runs.steps.get(ident)
        if step is not None and step.batch_id is not None:
            time_out(pol, runs, cluster, queues, log, step, now)


def reclaims(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog, now: float
) -> None:
    """Preempt the runs the tenancy half reclaims (asked once per step). The live set of runs
    that produced output is passed (no copy per step): the tenancy half only reads it during
    the call, and its orders are a list made before any run is preempted."""
    for order in pol.tenancy.reclaims(now, runs.output_started):
        preempt(pol, runs, cluster, queues, log, order.request_id, order.reason, now)


def placement(
    pol: Policies, catalog: Catalog, inbox: Inbox, cluster: Cluster, queues: Queues,
    rollouts: Rollouts, timers: Timers, ids: Ids, log: ActionLog, now: float,
) -> None:  # fmt: skip
    """Start or roll back rollouts and set canaries (takes ``inbox.placement_events``), advance
    the active rollout (loads, drains and moves in ``cluster`` and ``queues``; splits in ``catalog`` when it
    completes), scale idle models to zero (``timers.idle_check_at``: the next check)."""
    events, inbox.placement_events = inbox.placement_events, []
    for ev in events:
        if isinstance(ev, CanaryChanged):
            canary.change(pol, catalog, cluster, queues, ids, log, ev, now)
        elif isinstance(ev, PlacementChanged):
            target = {(m, tuple(d)): (n, pool) for m, d, n, pool in ev.placements}
            splits = dict(ev.splits)
            rollout.begin(catalog, cluster, rollouts, log, ev.plan_id, target, splits, ev.reason,
                          now)  # fmt: skip
        else:
            why: str = ev.reason  # type: ignore[attr-defined]
            rollout.request_rollback(catalog, cluster, rollouts, log, why, now)
    rollout.advance(pol, catalog, cluster, queues, rollouts, ids, log, now)
    scale_to_zero(pol, cluster, queues, rollouts, timers, log, now)


def routing(
    pol: Policies, catalog: Catalog, runs: Runs, cluster: Cluster, queues: Queues, ids: Ids,
    log: ActionLog, now: float,
) -> None:  # fmt: skip
    """Route new ready steps (tools to the host), take borrowed headroom back for the classes
    it is held for (``headroom_preempt``), then bind pending work late: takes
    ``queues.ready``; steps go to replica queues, pending queues, ``queues.tools`` or
    ``queues.unplaced``, and cold loads may start."""
    ready, queues.ready = queues.ready, []
    for step in ready:
        if not runs.is_live(step):
            continue
        if step.node.is_tool:
            queues.tools.append(step)
        else:
            route(pol, catalog, cluster, queues, ids, log, step, now)
    reclaim_headroom(pol, runs, cluster, queues, log, now)
    bind_pending(pol, catalog, cluster, queues, ids, log, now)


def retry_unplaced(
    pol: Policies, catalog: Catalog, runs: Runs, cluster: Cluster, queues: Queues, ids: Ids,
    log: ActionLog, now: float,
) -> None:  # fmt: skip
    """Route again the steps no device could take before (takes ``queues.unplaced``)."""
    waiting, queues.unplaced = queues.unplaced, {}
    for model_key in sorted(waiting):
        for step in waiting[model_key]:
            if runs.is_live(step):
                route(pol, catalog, cluster, queues, ids, log, step, now)


def batching(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, timers: Timers, ids: Ids,
    log: ActionLog, now: float,
) -> None:  # fmt: skip
    """Dispatch tool steps, then form batches on dirty (or headroom-blocked) replicas: takes
    ``queues.tools`` and the marks; batches go in flight (``cluster``) with their timeouts
    (``timers``), or a replica arms its batching deadline."""
    tools, queues.tools = queues.tools, []
    for step in tools:
        dispatch_tool(pol, cluster, timers, ids, log, step, now)
    dirty = sorted(queues.dirty | queues.headroom_blocked)
    queues.dirty.clear()
    queues.headroom_blocked.clear()
    for rid in dirty:
        rec = cluster.replicas.get(rid)
        if rec is not None:
            form_batch(pol, cluster, queues, timers, ids, log, rec, now)
    if pol.config.binding.bind_ahead_us:
        # replicas that just started a short batch take their next one
        bind_pending(pol, catalog, cluster, queues, ids, log, now)
