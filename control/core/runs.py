"""Run lifecycle: admission, turning ready DAG nodes into steps, completions, retries, the end.

A run ends exactly once (``finish``): its live steps are dropped from queues, tenancy releases
its quota, and one ``RunFinished`` is emitted. Progress reads the policies (tenancy, cost) and
changes the runs, the queues (new ready steps; steps of an ended run leave theirs) and the log.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.core.actions import Preempt, Reject, RunFinished, StepRetried
from control.core.capacity import capacity_refusal
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.dag import lineage, resume
from control.core.dag.run import CompiledDag, DagRun, StepRef
from control.core.dag.spec import NodeSpec
from control.core.headroom_fit import kept_from
from control.core.loads import preload_for_run
from control.core.parts import ActionLog, Catalog, Ids, Queues, Runs
from control.core.queueing import dequeue
from control.core.state import QueuedStep, RunRecord
from control.core.step_inputs import locate_inputs
from control.core.step_order import order_at
from control.core.tenancy.base import AdmissionRequest, Admitted, QueuedWork
from control.core.types import Request

#: Bound on memoized run estimates (distinct workflow x token-count combinations).
ESTIMATE_MEMO_SIZE = 4096


def _node_tokens(req: Request, node: NodeSpec) -> tuple[int, int]:
    params: Mapping[str, Any] = node.params  # as the workflow gave them
    tokens = int(params.get("input_tokens", req.prompt_tokens))
    if node.task != "generate":
        return tokens, 0
    return tokens, int(params.get("max_output_tokens", req.max_output_tokens))


def _estimate(pol: Policies, catalog: Catalog, req: Request, dag: CompiledDag) -> tuple[int, int]:
    """(tokens, cost units) a run of ``dag`` is expected to use over all its nodes.

    It depends only on the workflow and the request's token counts, so it is memoized per
    (workflow, prompt tokens, output tokens); the memo is a pure cache (dropped when it grows
    past its bound or a workflow is replaced)."""
    memo = catalog.estimates
    memo_key = (req.workflow, req.prompt_tokens, req.max_output_tokens)
    hit = memo.get(memo_key)
    if hit is not None:
        return hit
    est_tokens = est_cost = 0
    for node in dag.nodes.values():
        tin, tout = _node_tokens(req, node)
        est_tokens += tin + tout
        est_cost += pol.cost.cost_units(node.model or node.kind, tin, tout)
    if len(memo) >= ESTIMATE_MEMO_SIZE:
        memo.clear()
    memo[memo_key] = (est_tokens, est_cost)
    return est_tokens, est_cost


def admit(
    pol: Policies, catalog: Catalog, runs: Runs, cluster: Cluster, queues: Queues, ids: Ids,
    log: ActionLog, req: Request, now: float,
) -> None:  # fmt: skip
    """Ask tenancy; start the run (its ready nodes become steps, the models its later nodes
    need may be preloaded) or emit a Reject with its reason."""
    dag = catalog.workflows[req.workflow]
    kept = kept_from(pol, cluster, dag.first_models, req.priority_class)
    full = capacity_refusal(
        pol.config.capacity_admission, cluster, queues, dag.first_models, req.priority_class,
        req.deadline, now, kept,
    )  # fmt: skip
    if full is not None:  # before tenancy: a refused run takes no quota or tokens
        log.counters["runs.refused_capacity"] += 1
        log.emit(Reject(req.request_id, full.reason, full.retry_after_s))
        return
    est_tokens, est_cost = _estimate(pol, catalog, req, dag)
    decision = pol.tenancy.admit(
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
        log.emit(Reject(req.request_id, decision.reason, decision.retry_after_s))
        return
    run = RunRecord(req, DagRun(req.request_id, dag, step_key_base(req)), now)
    run.borrowed = decision.borrowed
    runs.active[req.request_id] = run
    log.counters["runs.started"] += 1
    if req.completed:  # a resumed run: only the steps not done before the restart run
        for ref in resume.replay(run.dag_run, req.completed):
            add_step(pol, runs, cluster, queues, run, ref, now)
        if run.dag_run.status == "succeeded":
            finish(pol, runs, cluster, queues, log, run, "succeeded", None, "done before", now)
    take_ready(pol, runs, cluster, queues, run, now)
    if dag.later_models:
        # model keys of model nodes: None is never among them
        later: tuple[str, ...] = dag.later_models  # type: ignore[assignment]
        first: frozenset[str] = dag.first_models  # type: ignore[assignment]
        preload_for_run(pol, catalog, cluster, ids, log, later, req.request_id, first, now)


def step_key_base(req: Request) -> str:
    """What the idempotency keys of a run's steps start with (the same for every attempt):
    the request id, or, for a request with an idempotency key, that key in its tenant's own
    namespace. The executor and the runtime know a step only by this key, so another tenant
    sending the same key must get other keys: ``<length of the tenant id>:<tenant id>/<key>``
    (the length makes the split unambiguous whatever the tenant id holds)."""
    if req.idempotency_key is None:
        return req.request_id
    return f"{len(req.tenant_id)}:{req.tenant_id}/{req.idempotency_key}"


def make_step(
    pol: Policies, cluster: Cluster, run: RunRecord, ref: StepRef, now: float
) -> QueuedStep:
    """A QueuedStep for one attempt: token estimates, cost, QoS, where its inputs are."""
    req = run.request
    node = run.dag_run.dag.nodes[ref.node_id]
    tokens, out = _node_tokens(req, node)
    if ref.chunk is not None:
        tokens = -(-tokens // run.dag_run.chunks(ref.node_id))
    deadline = req.deadline
    if node.deadline_s is not None:
        node_deadline = run.started_at + node.deadline_s
        deadline = node_deadline if deadline is None else min(deadline, node_deadline)
    work = QueuedWork(
        ref.key, req.request_id, req.tenant_id, node.priority_class or req.priority_class,
        now, pol.cost.cost_units(node.model or node.kind, tokens, out), deadline,
        order_at(pol, cluster, run, ref.node_id, deadline) if pol.critical_path else None,
    )  # fmt: skip
    step = QueuedStep(ref, run, node, work)
    step.input_tokens, step.max_output_tokens = tokens, out
    if node.task == "generate" and ref.chunk is None:
        step.prefix_blocks = req.prefix_blocks
    locate_inputs(pol.config.transfer, cluster, step, ref, tokens)
    return step


def take_ready(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, run: RunRecord, now: float
) -> None:
    """Turn the run's ready nodes into live steps waiting for the routing phase."""
    steps, ready = runs.steps, queues.ready
    for ref in run.dag_run.take_ready():  # ``add_step`` written out: every step runs this
        step = make_step(pol, cluster, run, ref, now)
        steps[step.key] = step
        ready.append(step)


def add_step(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, run: RunRecord, ref: StepRef,
    now: float,
) -> None:  # fmt: skip
    step = make_step(pol, cluster, run, ref, now)
    runs.steps[step.key] = step
    queues.ready.append(step)


#: Failures that are not the step's own, so not one of its node's ``retries`` (bounded as a
#: device loss instead): refused before it ran (its replica's breaker open, the replica not
#: loaded there), or its worker died under it (a host tool's index replica, which no
#: ``DeviceDown`` fails as lost: the core does not place it).
_NOT_THE_STEPS = frozenset({"unavailable", "worker_down"})


def on_item_done(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog,
    step: QueuedStep, result, device_id, replica_id, now: float,  # noqa: ANN001
) -> None:  # fmt: skip
    """One item of a batch finished: advance or retry its run, or end it."""
    run = step.run
    runs.steps.pop(step.key, None)
    if run.finished:
        return
    if result is not None and result.ok:
        run.used_tokens += result.input_tokens + result.output_tokens
        run.used_cost_units += pol.cost.cost_units(
            step.model_key or step.node.kind, result.input_tokens, result.output_tokens
        )
        if result.first_token:
            runs.output_started.add(run.request.request_id)
        run.dag_run.on_step_done(
            step.key, device_id, replica_id, result.route_label, result.item_count
        )
        take_ready(pol, runs, cluster, queues, run, now)
        if run.dag_run.status == "succeeded":
            finish(pol, runs, cluster, queues, log, run, "succeeded", None, "every node finished",
                   now)  # fmt: skip
        return
    error = (result.error if result is not None else None) or "step failed"
    if result is not None and result.fault == "bad_input":  # final: a retry cannot help
        run.dag_run.on_step_failed(step.key, error, final=True)
        if run.dag_run.status == "failed":
            run.fault = "bad_input"
            if result.field is not None:
                run.fault_field = run.dag_run.dag.caller_field(step.ref.node_id, result.field)
            reason = run.dag_run.error or error
            finish(pol, runs, cluster, queues, log, run, "failed", reason, reason, now)
        return
    if result is not None and lineage.is_input_loss(error, result.fault):
        return recover_input(
            pol, runs, cluster, queues, log, step, error, getattr(result, "lost", None), now
        )
    if result is not None and result.fault in _NOT_THE_STEPS:
        return fail_step(pol, runs, cluster, queues, log, step, error, now, lost=True)
    fail_step(pol, runs, cluster, queues, log, step, error, now)


def recover_input(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog,
    step: QueuedStep, error: str, lost, now: float,  # noqa: ANN001
) -> None:  # fmt: skip
    """An attempt failed because an input is gone (lost with its worker): recompute the steps
    that made it under fresh keys and park this one until they are done (``lineage``)."""
    run = step.run
    made = lineage.on_input_lost(run.dag_run, step.key, error, pol.config.max_recomputes, lost)
    for ref in made:
        why = f"recomputing an output {step.key} lost ({error})"
        log.emit(StepRetried(step.key, ref.key, ref.attempt, ref.idempotency_key, why))
        add_step(pol, runs, cluster, queues, run, ref, now)
    if run.dag_run.status == "failed":
        reason = run.dag_run.error or error
        finish(pol, runs, cluster, queues, log, run, "failed", run.dag_run.error, reason, now)


def fail_step(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog,
    step: QueuedStep, error: str, now: float, lost: bool = False,
) -> None:  # fmt: skip
    """A failed attempt: retry with the same idempotency key, or fail the run. ``lost``: the
    attempt died with its device or replica; its retry is bounded by the core's
    ``max_device_loss_retries`` instead of the node's ``retries``."""
    run = step.run
    runs.steps.pop(step.key, None)
    if lost:
        limit = pol.config.max_device_loss_retries
        retry = run.dag_run.on_step_lost(step.key, error, limit)
        why = (
            f"attempt {step.ref.attempt} lost ({error}); retrying elsewhere, not counted as a retry"
        )
    else:
        retry = run.dag_run.on_step_failed(step.key, error)
        why = f"attempt {step.ref.attempt} failed ({error}); retrying"
    if retry is not None:
        log.emit(StepRetried(step.key, retry.key, retry.attempt, retry.idempotency_key, why))
        add_step(pol, runs, cluster, queues, run, retry, now)
    elif run.dag_run.status == "failed":
        reason = run.dag_run.error or error
        finish(pol, runs, cluster, queues, log, run, "failed", run.dag_run.error, reason, now)


def finish(
    pol: Policies, runs: Runs, cluster: Cluster, queues: Queues, log: ActionLog, run: RunRecord,
    status: str, error: str | None, reason: str, now: float, preempted: bool = False,
) -> None:  # fmt: skip
    """End a run exactly once: drop its queued steps, emit ``Preempt`` (when preempted, naming
    the steps in flight to cancel) and ``RunFinished``, release its quota."""
    if run.finished:
        return
    run.finished = True
    run.status = status
    in_flight = []
    for key in run.dag_run.cancel(status) if status != "succeeded" else ():
        step = runs.steps.pop(key, None)
        if step is None:
            continue
        if step.batch_id is not None:
            in_flight.append(key)
        elif step.replica_id is not None or step.pending_model is not None:
            dequeue(pol, cluster, queues, step, False, now)
    outputs = run.dag_run.outputs() if status == "succeeded" else {}
    rid = run.request.request_id
    if preempted:
        log.emit(Preempt(rid, tuple(in_flight), reason))
    fault = run.fault if status == "failed" else None
    log.emit(RunFinished(rid, status, outputs, error, reason, fault, run.fault_field))
    pol.tenancy.release(rid, run.used_tokens, run.used_cost_units, now)
    runs.active.pop(rid, None)
    runs.finished.append(run)
    runs.output_started.discard(rid)
    log.counters[f"runs.{status}"] += 1
