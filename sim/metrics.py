"""What one twin run observed, recorded as it happens (the driver's ``Observer``).

Per request: arrival, tenant, workflow, deadline, first output token of the workflow's output
node(s), end time and status. Per device: busy time per time bucket. Per tenant: service given
(cost units at dispatch) for the fairness metrics. Prefix-cache blocks asked for and hit, tokens
and cost units served, loads, and periodic queue depths read from the core's snapshot (per
model: steps bound to its replicas plus steps still pending, unbound, for it). Kept
small per event: the twin's speed depends on it.

Busy time of a replica that batches continuously (``Completion.joined``) is the union of its
batches' [dispatch, end) intervals, which overlap: it is recorded per busy period (from the
dispatch that finds the replica with nothing in flight to the end, or loss, of its last batch),
since a later join can still move a batch's end. A request's first token is its own batch's
prefill end, read from the batch's final completion.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from control.core.actions import Dispatch, LoadModel, Reject, RunFinished
from control.core.engine import ControlCore
from control.core.tenancy.cost import CostModel
from control.core.tenancy.metrics import ServiceSample
from control.core.types import Request
from control.core.values import record
from sim.executor import Completion


@record
class RequestRecord:
    arrival: float
    tenant: str
    workflow: str
    deadline: float | None
    first_token: float | None
    end: float | None
    status: str  # "running" | "succeeded" | "failed" | "preempted" | "timed_out" | "rejected"


def _busy_table() -> dict[str, dict[int, float]]:
    """device -> bucket -> busy seconds. Named functions, not nested lambdas: mypyc 2.4 crashes
    on a lambda inside a dataclass field's default factory lambda."""
    return defaultdict(_float_table)


def _float_table() -> dict[int, float]:
    return defaultdict(float)


@dataclass
class Recorder:
    """An ``Observer`` for :class:`sim.driver.TwinDriver`."""

    cost: CostModel
    output_nodes: dict[str, frozenset[str]]  # workflow -> nodes whose output the caller gets
    bucket_s: float = 1.0
    requests: dict[str, RequestRecord] = field(default_factory=dict)
    busy: dict[str, dict[int, float]] = field(default_factory=_busy_table)
    service: list[ServiceSample] = field(default_factory=list)
    queue_depth: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    preload: dict[str, int] = field(default_factory=dict)
    #: continuous replica -> [batches in flight, start of its busy period]
    _periods: dict[str, list] = field(default_factory=dict)

    def on_submit(self, req: Request, now: float) -> None:
        self.requests[req.request_id] = RequestRecord(
            now, req.tenant_id, req.workflow, req.deadline, None, None, "running"
        )

    def on_dispatch(self, d: Dispatch, done: Completion, now: float) -> None:
        if done.joined:
            period = self._periods.get(d.replica_id or "")
            if period is None:
                self._periods[d.replica_id or ""] = [1, now]
            else:
                period[0] += 1
        elif d.replica_id is not None:
            self._busy(d.device_ids, now, now + done.duration_us / 1e6)
        # per item: a service sample; counts are summed over the batch and added once (methods
        # are called on their objects, not through bound-method locals: compiled, that is a
        # direct call instead of a Python-level one)
        cost, reqs, service = self.cost, self.requests, self.service
        key = d.model_key or d.tool or ""
        blocks = 0
        for it in d.items:
            units = cost.cost_units(key, it.input_tokens, it.max_output_tokens)
            rec = reqs.get(it.request_id)
            if rec is not None:
                service.append(ServiceSample(now, rec.tenant, units))
            if it.prefix_blocks:
                blocks += len(it.prefix_blocks)
        counts = self.counts
        if blocks:
            counts["prefix_blocks"] += blocks
        counts["batches"] += 1
        counts["items"] += len(d.items)

    def on_complete(self, d: Dispatch, done: Completion, now: float) -> None:
        if done.joined:
            self._leave(d, now)
        # sums over the batch, added once (the same totals as adding item by item), read from
        # the core's view of the batch (``to_batch_result`` of the records: compiled classes);
        # an item's record only for its first token's offset
        cost, key = self.cost, d.model_key or d.tool or ""
        tokens = units = hits = 0
        for i, s in enumerate(done.result.items):
            tokens += s.input_tokens + s.output_tokens
            units += cost.cost_units(key, s.input_tokens, s.output_tokens)
            hits += s.prefix_hit_blocks
            if not s.first_token:
                continue
            it = d.items[i]
            rec = self.requests.get(it.request_id)
            if (
                rec is not None
                and rec.first_token is None
                and it.node_id in self.output_nodes.get(rec.workflow, ())
            ):
                first_ms = done.records[i].first_token_ms or 0.0  # not None: ``s.first_token``
                rec.first_token = now - (done.duration_us / 1e3 - first_ms) / 1e3
        if d.items:  # (an empty batch leaves the counts untouched, as item by item did)
            counts = self.counts
            counts["tokens"] += tokens
            counts["cost_units"] += units
            counts["prefix_hit_blocks"] += hits

    def on_drop(self, d: Dispatch, done: Completion, now: float) -> None:
        # a static batch's busy time was counted whole at dispatch (the device was reserved)
        if done.joined:
            self._leave(d, now)

    def _leave(self, d: Dispatch, now: float) -> None:
        """A joined batch left its replica: a busy period ends when none is left in flight."""
        period = self._periods[d.replica_id or ""]
        period[0] -= 1
        if period[0] == 0:
            del self._periods[d.replica_id or ""]
            self._busy(d.device_ids, period[1], now)

    def on_reject(self, a: Reject, now: float) -> None:
        rec = self.requests.get(a.request_id)
        if rec is not None:
            rec.status, rec.end = "rejected", now

    def on_finish(self, a: RunFinished, now: float) -> None:
        rec = self.requests.get(a.request_id)
        if rec is not None:
            rec.status, rec.end = a.status, now

    def on_load(self, a: LoadModel, ready_at: float) -> None:
        self.counts["loads"] += 1
        self.counts["loads_speculative"] += int(a.speculative)

    def sample(self, core: ControlCore, now: float) -> None:
        snap = core.snapshot()
        depth: dict[str, int] = defaultdict(int)
        for r in snap.replicas:
            depth[r.model_key] += r.queue_len
        # late binding keeps most waiting steps unbound (pending per model): they wait too
        for model_key, steps in snap.pending.items():
            depth[model_key] += len(steps)
        depth["unplaced"] = len(snap.unplaced)
        self.queue_depth.append((now, dict(depth)))

    def finalize(self, core: ControlCore) -> None:
        """Read end-of-run figures the core keeps (preload outcomes)."""
        p = core.snapshot().preload
        self.preload = {"issued": p.issued, "hits": p.hits, "misses": p.misses}

    def _busy(self, device_ids: tuple[str, ...], start: float, end: float) -> None:
        """Spread [start, end) over the buckets it covers (bucket k = [k*size, (k+1)*size))."""
        size = self.bucket_s
        first, last = int(start // size), int(end // size)
        for dev in device_ids:
            buckets = self.busy[dev]
            for k in range(first, last + 1):
                part = min(end, (k + 1) * size) - max(start, k * size)
                if part > 0:
                    buckets[k] += part
