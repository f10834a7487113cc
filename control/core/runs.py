"""Run lifecycle: admission, turning ready DAG nodes into steps, completions, retries, the end.

A run ends exactly once (``finish``): its live steps are dropped from queues, tenancy releases
its quota, and one ``RunFinished`` is emitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.core.actions import Preempt, Reject, RunFinished, StepRetried
from control.core.context import CoreState
from control.core.dag.run import DagRun, StepRef
from control.core.dag.spec import NodeSpec
from control.core.loads import preload_for_run
from control.core.queueing import dequeue
from control.core.state import QueuedStep, RunRecord
from control.core.tenancy.base import AdmissionRequest, Admitted, QueuedWork
from control.core.types import Request

#: Bound on memoized run estimates (distinct workflow x token-count combinations).
ESTIMATE_MEMO_SIZE = 4096


def _node_tokens(st: CoreState, req: Request, node: NodeSpec) -> tuple[int, int]:
    params: Mapping[str, Any] = node.params  # as the workflow gave them
    tokens = int(params.get("input_tokens", req.prompt_tokens))
    out = (
        int(params.get("max_output_tokens", req.max_output_tokens))
        if node.task == "generate"
        else 0
    )
    return tokens, out


def _estimate(st: CoreState, req, dag) -> tuple[int, int]:  # noqa: ANN001
    """(tokens, cost units) a run of ``dag`` is expected to use over all its nodes.

    It depends only on the workflow and the request's token counts, so it is memoized per
    (workflow, prompt tokens, output tokens); the memo is a pure cache (dropped when it grows
    past its bound or a workflow is replaced)."""
    memo_key = (req.workflow, req.prompt_tokens, req.max_output_tokens)
    hit = st.estimates.get(memo_key)
    if hit is not None:
        return hit
    est_tokens = est_cost = 0
    for node in dag.nodes.values():
        tin, tout = _node_tokens(st, req, node)
        est_tokens += tin + tout
        est_cost += st.cost.cost_units(node.model or node.kind, tin, tout)
    if len(st.estimates) >= ESTIMATE_MEMO_SIZE:
        st.estimates.clear()
    st.estimates[memo_key] = (est_tokens, est_cost)
    return est_tokens, est_cost


def admit(st: CoreState, req, now: float) -> None:  # noqa: ANN001
    """Ask tenancy; start the run or emit a Reject with its reason."""
    dag = st.workflows[req.workflow]
    est_tokens, est_cost = _estimate(st, req, dag)
    decision = st.tenancy.admit(
        AdmissionRequest(
            req.request_id,
            req.tenant_id,
            req.priority_class,
            est_tokens,
            est_cost,
            now,
            req.deadline,
        ),
        now,
    )
    if not isinstance(decision, Admitted):
        st.emit(Reject(req.request_id, decision.reason, decision.retry_after_s))
        return
    run = RunRecord(req, DagRun(req.request_id, dag, req.idempotency_key or req.request_id), now)
    run.borrowed = decision.borrowed
    st.runs[req.request_id] = run
    st.counters["runs.started"] += 1
    take_ready(st, run)
    if dag.later_models:
        preload_for_run(st, dag.later_models, req.request_id, dag.first_models)  # type: ignore[arg-type]


def make_step(st: CoreState, run: RunRecord, ref: StepRef) -> QueuedStep:
    """A QueuedStep for one attempt: token estimates, cost, QoS, where its inputs are."""
    req = run.request
    node = run.dag_run.dag.nodes[ref.node_id]
    tokens, out = _node_tokens(st, req, node)
    if ref.chunk is not None:
        tokens = -(-tokens // run.dag_run.chunks(ref.node_id))
    deadline = req.deadline
    if node.deadline_s is not None:
        node_deadline = run.started_at + node.deadline_s
        deadline = node_deadline if deadline is None else min(deadline, node_deadline)
    work = QueuedWork(
        ref.key, req.request_id, req.tenant_id, node.priority_class or req.priority_class,
        st.now, st.cost.cost_units(node.model or node.kind, tokens, out), deadline,
    )  # fmt: skip
    step = QueuedStep(ref, run, node, work)
    step.input_tokens, step.max_output_tokens = tokens, out
    if node.task == "generate" and ref.chunk is None:
        step.prefix_blocks = req.prefix_blocks
    devs = st.cluster.devices
    located = []
    for b in ref.inputs:
        for r in b.refs:
            if r.device_id is not None:
                dev = devs.get(r.device_id)
                located.append(dev.spec if dev is not None else None)
    if located:
        step.input_devices = tuple(located)
    return step


def take_ready(st: CoreState, run: RunRecord) -> None:
    """Turn the run's ready nodes into live steps waiting for the routing phase."""
    steps, ready = st.steps, st.ready
    for ref in run.dag_run.take_ready():  # ``add_step`` written out: every step runs this
        step = make_step(st, run, ref)
        steps[step.key] = step
        ready.append(step)


def add_step(st: CoreState, run: RunRecord, ref: StepRef) -> None:
    step = make_step(st, run, ref)
    st.steps[step.key] = step
    st.ready.append(step)


def on_item_done(st: CoreState, step: QueuedStep, result, device_id, replica_id) -> None:  # noqa: ANN001
    """One item of a batch finished: advance or retry its run, or end it."""
    run = step.run
    st.steps.pop(step.key, None)
    if run.finished:
        return
    if result is not None and result.ok:
        run.used_tokens += result.input_tokens + result.output_tokens
        run.used_cost_units += st.cost.cost_units(
            step.model_key or step.node.kind, result.input_tokens, result.output_tokens
        )
        if result.first_token:
            st.output_started.add(run.request.request_id)
        run.dag_run.on_step_done(
            step.key, device_id, replica_id, result.route_label, result.item_count
        )
        take_ready(st, run)
        if run.dag_run.status == "succeeded":
            finish(st, run, "succeeded", None, "every node finished")
        return
    error = (result.error if result is not None else None) or "step failed"
    fail_step(st, step, error)


def fail_step(st: CoreState, step: QueuedStep, error: str, lost: bool = False) -> None:
    """A failed attempt: retry with the same idempotency key, or fail the run. ``lost``: the
    attempt died with its device or replica; its retry is bounded by the core's
    ``max_device_loss_retries`` instead of the node's ``retries``."""
    run = step.run
    st.steps.pop(step.key, None)
    if lost:
        limit = st.config.max_device_loss_retries
        retry = run.dag_run.on_step_lost(step.key, error, limit)
        why = (
            f"attempt {step.ref.attempt} lost ({error}); retrying elsewhere, not counted as a retry"
        )
    else:
        retry = run.dag_run.on_step_failed(step.key, error)
        why = f"attempt {step.ref.attempt} failed ({error}); retrying"
    if retry is not None:
        st.emit(StepRetried(step.key, retry.key, retry.attempt, retry.idempotency_key, why))
        add_step(st, run, retry)
    elif run.dag_run.status == "failed":
        finish(st, run, "failed", run.dag_run.error, run.dag_run.error or error)


def finish(
    st: CoreState,
    run: RunRecord,
    status: str,
    error: str | None,
    reason: str,
    preempted: bool = False,
) -> None:
    """End a run exactly once: drop its queued steps, emit ``Preempt`` (when preempted, naming
    the steps in flight to cancel) and ``RunFinished``, release its quota."""
    if run.finished:
        return
    run.finished = True
    run.status = status
    in_flight = []
    for key in run.dag_run.cancel(status) if status != "succeeded" else ():
        step = st.steps.pop(key, None)
        if step is None:
            continue
        if step.batch_id is not None:
            in_flight.append(key)
        elif step.replica_id is not None or step.pending_model is not None:
            dequeue(st, step, dispatched=False)
    outputs = run.dag_run.outputs() if status == "succeeded" else {}
    rid = run.request.request_id
    if preempted:
        st.emit(Preempt(rid, tuple(in_flight), reason))
    st.emit(RunFinished(rid, status, outputs, error, reason))
    st.tenancy.release(rid, run.used_tokens, run.used_cost_units, st.now)
    st.runs.pop(rid, None)
    st.finished.append(run)
    st.output_started.discard(rid)
    st.counters[f"runs.{status}"] += 1


def preempt(st: CoreState, request_id: str, reason: str) -> None:
    run = st.runs.get(request_id)
    if run is None or run.finished:
        return
    finish(st, run, "preempted", reason, reason, preempted=True)
