"""The phases of one ``ControlCore.step``, in ``actions.PHASES`` order.

``run_phases`` is the body of ``step``: each phase is a function of the core's state that may
emit actions (tagged with ``st.phase``). A phase with nothing to do is skipped: each guard below
is the phase's own "nothing to do" condition, so skipping changes no decision, and a step at an
instant that touched little costs little (a busy twin runs millions of steps).
"""

from __future__ import annotations

import heapq

from control.core import rollout, runs
from control.core.batcher import arm_ahead, dispatch_tool, form_batch
from control.core.context import CoreState
from control.core.events import DeviceDown, PlacementChanged, ReplicaLoadFailed
from control.core.fleet import device_down, fail_replica
from control.core.lifecycle import scale_to_zero
from control.core.queueing import bind_pending, route
from control.core.stealer import steal_phase
from control.core.types import BatchResult


def run_phases(st: CoreState) -> None:
    """Make every decision due at ``st.now`` (set by the caller with ``st.actions`` empty)."""
    now = st.now
    st.phase = "admission"
    if st.submitted:
        admission(st)
    st.phase = "completions"
    if st.deferred or st.completed:
        completions(st)
    st.phase = "timeouts"
    if st.timers and st.timers[0][0] <= now:
        timers(st)
    st.phase = "reclaims"
    reclaims(st)
    st.phase = "placement"
    if st.placement_events or st.rollout is not None or st.config.scale_to_zero_idle_s is not None:
        placement(st)  # otherwise nothing to roll out and nothing scales to zero
    st.phase = "routing"
    if st.ready or st.pending:
        routing(st)
    st.phase = "loads"
    if st.unplaced:
        retry_unplaced(st)
    st.phase = "stealing"
    if st.dirty:
        reps = st.cluster.replicas
        idle = sorted(r for r in st.dirty if r in reps and reps[r].idle)
    else:
        idle = []
    steal_phase(st, idle)
    st.phase = "batching"
    if st.tools or st.dirty or st.headroom_blocked or st.config.binding.bind_ahead_us:
        batching(st)


def admission(st: CoreState) -> None:
    """Admit or refuse every submitted request."""
    submitted, st.submitted = st.submitted, []
    for req, _at in submitted:
        runs.admit(st, req, st.now)


def completions(st: CoreState) -> None:
    """Apply deferred fleet events, then finished batches (their steps advance)."""
    deferred, st.deferred = st.deferred, []
    for ev in deferred:
        if isinstance(ev, DeviceDown):
            device_down(st, ev.device_id, ev.reason)
        elif isinstance(ev, ReplicaLoadFailed):
            fail_replica(st, ev.replica_id, f"load failed: {ev.error}")
        else:
            fail_replica(st, ev.replica_id, "replica unloaded")  # type: ignore[attr-defined]
    done, st.completed = st.completed, []
    for result, _at in done:
        batch_done(st, result)


def batch_done(st: CoreState, result: BatchResult) -> None:
    """Free the batch's replica and advance (or retry) each of its live steps."""
    batch = st.batches.pop(result.batch_id, None)
    if batch is None:
        return
    rec = st.cluster.replicas.get(batch.replica_id or "")
    if rec is not None:
        rec.stop_running(result.batch_id, len(batch.items), st.now)
        arm_ahead(st, rec)  # a batch sent ahead now runs alone: look again near its end
        st.dirty.add(rec.replica_id)
        st.batching.observe(rec.model, len(batch.items), result.device_us)
    reported = {r.key: r for r in result.items}
    for key, step in batch.items.items():
        if st.steps.get(key) is not step:
            continue  # stale attempt (timed out, run ended)
        res = reported.get(key)
        dev = rec.device.device_id if rec else None
        runs.on_item_done(st, step, res, dev, batch.replica_id)


def timers(st: CoreState) -> None:
    """Fire due timers: batching deadlines and dispatch-ahead points (replica dirty) and step
    timeouts."""
    while st.timers and st.timers[0][0] <= st.now:
        _, _, kind, ident = heapq.heappop(st.timers)
        if kind == "batch" or kind == "ahead":
            st.dirty.add(ident)
            continue
        step = st.steps.get(ident)
        if step is not None and step.batch_id is not None:
            st.counters["steps.timed_out"] += 1
            runs.fail_step(st, step, f"timed out after {step.node.timeout_s} s")


def reclaims(st: CoreState) -> None:
    """Preempt the runs the tenancy half reclaims (asked once per step). The live set of runs
    that produced output is passed (no copy per step): the tenancy half only reads it during
    the call, and its orders are a list made before any run is preempted."""
    for order in st.tenancy.reclaims(st.now, st.output_started):
        runs.preempt(st, order.request_id, order.reason)


def placement(st: CoreState) -> None:
    """Start or roll back rollouts, advance the active one, scale idle models to zero."""
    events, st.placement_events = st.placement_events, []
    for ev in events:
        if isinstance(ev, PlacementChanged):
            target = {(m, tuple(d)): (n, pool) for m, d, n, pool in ev.placements}
            rollout.begin(st, ev.plan_id, target, dict(ev.splits), ev.reason)
        else:
            rollout.request_rollback(st, ev.reason)  # type: ignore[attr-defined]
    rollout.advance(st)
    scale_to_zero(st)


def routing(st: CoreState) -> None:
    """Route new ready steps (tools to the host), then bind pending work late."""
    ready, st.ready = st.ready, []
    for step in ready:
        if st.steps.get(step.key) is not step:
            continue
        if step.node.is_tool:
            st.tools.append(step)
        else:
            route(st, step)
    bind_pending(st)


def retry_unplaced(st: CoreState) -> None:
    """Route again the steps no device could take before."""
    waiting, st.unplaced = st.unplaced, {}
    for model_key in sorted(waiting):
        for step in waiting[model_key]:
            if st.steps.get(step.key) is step:
                route(st, step)


def batching(st: CoreState) -> None:
    """Dispatch tool steps, then form batches on dirty (or headroom-blocked) replicas."""
    tools, st.tools = st.tools, []
    for step in tools:
        dispatch_tool(st, step)
    dirty = sorted(st.dirty | st.headroom_blocked)
    st.dirty.clear()
    st.headroom_blocked.clear()
    for rid in dirty:
        rec = st.cluster.replicas.get(rid)
        if rec is not None:
            form_batch(st, rec)
    if st.config.binding.bind_ahead_us:
        bind_pending(st)  # replicas that just started a short batch take their next one
