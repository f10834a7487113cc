"""Critical-path step order: a run's ready steps ranked by the predicted work still ahead of them.

``CoreConfig.step_order`` picks how a tenant's waiting steps are ordered, in a model's pending
queue (late binding) and in a replica's queue when a batch forms:

- ``arrival`` (the default): by deadline, then by when the step became ready.
- ``critical_path``: program-level priority (as Autellix and Parrot do for one LLM, here across
  every model of a workflow). Each step gets ``order_at``, its *latest start*: the run's
  deadline (or, without one, the instant the run started) less the remaining critical path from
  its node, i.e. the longest path of predicted latencies from that node to the end of the DAG.
  The smaller goes first. Of two steps of runs that started together, the one with more work
  ahead goes first (the deep branch before the shallow one); an older run's step goes first
  when it has waited longer than the difference in their work ahead. Anchoring on the run's
  start rather than ordering by remaining work alone keeps a burst of new runs (whose first
  steps always have the most work ahead) from starving the last steps of older runs: sorting by
  latest start is earliest-deadline-first on per-step deadlines, which bounds the worst lateness.

How it composes: fair share still decides *which tenant* is served next (the tenancy half's
``select`` / ``order`` are unchanged); priority classes still come first inside a tenant; steps
with a deadline still come before steps without; critical-path order replaces only deadline and
arrival among a tenant's steps of one class (``control.core.tenancy.priority``). Under ``fcfs``
(no tenants) it orders every waiting step.

Cost: the remaining path is computed once per workflow and request size class (prompt and
output tokens, each rounded up to a power of two less one) and memoized on the ``CompiledDag``;
a step's priority is one float set when it becomes ready.
Switching the option live applies to steps that become ready afterwards. Predictions use the
latency model at batch size 1 on the device type serving the model (or the fleet's first
device when none does yet) when the memo entry is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.core.cluster import Cluster
from control.core.context import STEP_ORDERS, Policies
from control.core.dag.spec import NodeSpec
from control.core.latency import service_us
from control.core.state import RunRecord

#: Steps of one tenant and class: ``arrival`` order or ``critical_path`` order (module doc).
__all__ = ["STEP_ORDERS", "order_at"]

#: Predicted latency of a node that runs no model (a tool on the host), in microseconds: small
#: but not zero, so that a deeper chain of tools still counts as more work ahead.
TOOL_US = 1_000

#: Memo entries kept per workflow (size classes); past it the memo starts again (pure cache).
MAX_MEMO = 1024


def order_at(
    pol: Policies, cluster: Cluster, run: RunRecord, node_id: str, deadline: float | None
) -> float:
    """The latest start (core seconds) of ``node_id``'s step in ``run``: ``deadline`` (else the
    run's start) less the predicted remaining critical path from that node."""
    req = run.request
    dag = run.dag_run.dag
    # sizes rounded up to a power of two: a trace's many distinct sizes share few entries
    size = (req.prompt_tokens.bit_length(), req.max_output_tokens.bit_length())
    ahead = dag.remaining_memo.get(size)
    if ahead is None:
        if len(dag.remaining_memo) >= MAX_MEMO:
            dag.remaining_memo.clear()
        ahead = dag.remaining_path(
            _Estimator(pol, cluster, ((1 << size[0]) - 1, (1 << size[1]) - 1))
        )
        dag.remaining_memo[size] = ahead
    anchor = deadline if deadline is not None else run.started_at
    return anchor - ahead[node_id] / 1e6


class _Estimator:
    """Predicted latency of one node for a run of one request size (a callable for
    ``CompiledDag.remaining_path``)."""

    def __init__(self, pol: Policies, cluster: Cluster, size: tuple[int, int]) -> None:
        self.pol = pol
        self.cluster = cluster
        self.prompt, self.out = size
        first = next(iter(cluster.devices.values()), None)
        self.default_dt = first.spec.accelerator if first is not None else ""

    def __call__(self, node: NodeSpec) -> int:
        if not node.model:
            return TOOL_US
        params: Mapping[str, Any] = node.params  # as the workflow gave them (as ``runs``)
        tokens = int(params.get("input_tokens", self.prompt))
        out = int(params.get("max_output_tokens", self.out)) if node.task == "generate" else 0
        reps = self.cluster.by_model.get(node.model)
        rec = next(iter(reps.values()), None) if reps else None
        dt = rec.device.accelerator if rec is not None else self.default_dt
        return service_us(self.pol.latency, node.model, dt, 1, tokens, out)
