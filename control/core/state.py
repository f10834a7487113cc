"""Mutable records the engine keeps: devices, replicas with their local queues, steps, runs.

Internal to the core (the outside world sees ``snapshot()``). A replica keeps its queue's
predicted backlog on enqueue/dequeue; the indexes over replicas (per model, with queued work)
are ``cluster.Cluster``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from control.core.dag.run import DagRun, StepRef
from control.core.dag.spec import NodeSpec
from control.core.routing.adapter_lru import AdapterLru
from control.core.routing.base import RouteChoice
from control.core.routing.prefix_index import PrefixIndex
from control.core.tenancy.base import QueuedWork
from control.core.types import DeviceSpec, ModelSpec, ReplicaState, Request
from control.core.values import record
from control.core.variant_choice import VariantDecision


class QueuedStep:
    """One live step attempt: ready, queued on a replica, or in flight."""

    __slots__ = (
        "ref", "key", "run", "node", "model_key", "input_tokens", "max_output_tokens",
        "prefix_blocks", "arrival", "cost_units", "est_us", "work", "replica_id", "batch_id",
        "hit_blocks", "dispatched_at", "input_devices", "input_bytes", "pending_model", "est_dt",
        "route", "variant",
    )  # fmt: skip

    def __init__(self, ref: StepRef, run: RunRecord, node: NodeSpec, work: QueuedWork) -> None:
        self.ref = ref
        self.key = ref.key
        self.run = run
        self.node = node
        self.model_key: str | None = node.model
        self.input_tokens = 0
        self.max_output_tokens = 0
        self.prefix_blocks: tuple[int, ...] = ()
        self.arrival = work.arrival
        self.cost_units = work.cost_units
        self.est_us = 0
        self.work = work
        self.replica_id: str | None = None
        self.batch_id: str | None = None
        self.hit_blocks = 0
        self.dispatched_at: float | None = None
        self.input_devices: tuple[DeviceSpec | None, ...] = ()
        #: bytes of each of ``input_devices`` (empty: not sized, as no tier prices bytes)
        self.input_bytes: tuple[int, ...] = ()
        self.pending_model: str | None = None  # model whose pending queue holds it (unbound)
        self.est_dt: str | None = None  # device type ``est_us`` was predicted for
        self.route: RouteChoice | None = None  # the routing decision that queued it last
        #: which precision variant serves it and why (``variant_choice``; None: no variants)
        self.variant: VariantDecision | None = None

    def prefill_tokens(self, block_tokens: int) -> int:
        """The prompt tokens its replica computes: all but the predicted prefix cache hit."""
        return max(0, self.input_tokens - self.hit_blocks * block_tokens)


class ReplicaRecord:
    """A model replica on one device (or a tensor-parallel group) and its local queue."""

    __slots__ = (
        "replica_id", "model", "devices", "device", "pool", "state", "ready_at", "busy_until",
        "queue", "queue_us", "running", "running_seqs", "loop_seqs", "prefill_until", "prefix",
        "last_used", "speculative", "used", "load_reason", "routable", "draining", "plan_id",
        "breaker", "adapters",
    )  # fmt: skip

    def __init__(
        self, replica_id: str, model: ModelSpec, devices: tuple[DeviceSpec, ...], pool: str,
        state: ReplicaState, prefix_capacity: int,
    ) -> None:  # fmt: skip
        self.replica_id = replica_id
        self.model = model
        self.devices = devices
        self.device = devices[0]
        self.pool = pool
        self.state = state
        self.ready_at = 0.0
        self.busy_until = 0.0
        self.queue: dict[str, QueuedStep] = {}
        self.queue_us = 0
        # batch id -> predicted end (s). One batch at a time, or several sharing the decode
        # loop of a continuous-batching model (their sequences within max_batch_size)
        self.running: dict[str, float] = {}
        self.running_seqs = 0
        # sequences a newcomer would decode beside: ``running_seqs`` of a continuous loop, else
        # 0 (an attribute, not a property: routing reads it per candidate per decision)
        self.loop_seqs = 0
        # continuous batching: when the prefills already scheduled on the loop end (joiners
        # prefill one after another, each stalling the loop); routing counts it as waiting
        self.prefill_until = 0.0
        self.prefix = PrefixIndex(prefix_capacity)
        self.last_used = 0.0
        self.speculative = False
        self.used = False
        self.load_reason = ""
        self.routable = True  # False: loading for a rollout, or draining (no new work)
        self.draining = False
        self.plan_id: str | None = None  # the rollout that loaded it
        # the executor's circuit breaker: "closed", "open" (not routable: no new work) or
        # "half_open" (routable, one batch at a time: the probe); see control.core.breakers
        self.breaker = "closed"
        # the LoRA adapters the replica holds, as the core mirrors them (routing.adapters)
        self.adapters = AdapterLru(model.max_adapters, int(model.adapter_load_s * 1e6))

    @property
    def loading(self) -> bool:
        return self.state == ReplicaState.LOADING

    @property
    def idle(self) -> bool:
        return self.state == ReplicaState.READY and not self.running and not self.queue

    @property
    def sends_ahead(self) -> bool:
        """Whether a batch may be sent ahead to this replica while one runs: not for generate
        models, whose live worker takes a waiting batch of its replica into the running decode
        loop (a static generate replica keeps one batch at a time)."""
        return self.model.task != "generate"

    def free_slots(self, now: float = 0.0, ahead_s: float = 0.0) -> int:
        """Sequences a new batch may bring now: the whole batch size when nothing runs; with
        continuous batching what the running batches leave of it; otherwise, while one batch
        runs, the whole batch size once it is predicted to end within ``ahead_s`` (its
        successor is sent ahead and waits in the executor: dispatch ahead), else 0."""
        if not self.running:
            return self.model.max_batch_size
        if self.breaker != "closed":  # the probe runs: nothing joins it or is sent ahead
            return 0
        if self.model.continuous_batching:
            return max(0, self.model.max_batch_size - self.running_seqs)
        if (
            ahead_s > 0.0
            and self.sends_ahead
            and len(self.running) == 1
            and (self.busy_until - ahead_s <= now)
        ):
            return self.model.max_batch_size
        return 0

    def start_running(
        self, batch_id: str, seqs: int, now: float, end: float, prefill_s: float
    ) -> None:
        """Record a dispatched batch. On a continuous replica its prefill (``prefill_s``) runs
        after the prefills already scheduled and delays the batches already running: they
        wait while it runs."""
        if self.model.continuous_batching:
            if self.running:
                for bid in self.running:
                    self.running[bid] += prefill_s
            self.prefill_until = max(now, self.prefill_until) + prefill_s
        self.running[batch_id] = end
        self.running_seqs += seqs
        if self.model.continuous_batching:
            self.loop_seqs = self.running_seqs
        self._refresh_busy(now)

    def stop_running(self, batch_id: str, seqs: int, now: float) -> bool:
        """Forget a finished (or dropped) batch; False when it was not running here."""
        if self.running.pop(batch_id, None) is None:
            return False
        self.running_seqs = max(0, self.running_seqs - seqs)
        if self.model.continuous_batching:
            self.loop_seqs = self.running_seqs
        self._refresh_busy(now)
        return True

    def presume_busy(self, batch_id: str, until: float, now: float) -> None:
        """A batch of this replica outlived its step's timeout: presume it runs until
        ``until`` (nothing is sent ahead to it, routing prices its wait) unless it ends first."""
        if batch_id in self.running:
            self.running[batch_id] = max(self.running[batch_id], until)
            self._refresh_busy(now)

    def _refresh_busy(self, now: float) -> None:
        # busy_until: when the replica can next START new work (what routing, binding and
        # stealing compare): the end of the last batch sent to a static replica; now while a
        # continuous replica has a free slot, else the earliest end (which frees slots)
        if not self.running:
            self.busy_until = now
        elif not self.model.continuous_batching:
            self.busy_until = max(self.running.values())  # a batch sent ahead runs after
        elif self.running_seqs < self.model.max_batch_size:
            self.busy_until = now
        else:
            self.busy_until = min(self.running.values())

    def wait_us(self, now: float) -> int:
        """Predicted delay before a newly queued item could start (load + in flight + queue)."""
        load = max(0.0, self.ready_at - now) if self.loading else 0.0
        busy = max(0.0, self.busy_until - now) + max(0.0, self.prefill_until - now)
        return int((load + busy) * 1e6) + self.queue_us


@dataclass
class DeviceRecord:
    spec: DeviceSpec
    up: bool = True
    used_mib: int = 0
    replicas: set[str] = field(default_factory=set)

    @property
    def free_mib(self) -> int:
        return self.spec.memory_mib - self.used_mib


@record
class InflightBatch:
    batch_id: str
    replica_id: str | None
    model_key: str | None
    items: dict[str, QueuedStep]
    dispatched_at: float
    predicted_us: int


@record
class RunRecord:
    request: Request
    dag_run: DagRun
    started_at: float
    borrowed: bool = False
    used_tokens: int = 0
    used_cost_units: int = 0
    finished: bool = False
    status: str = "running"
    fault: str | None = None  # ``bad_input``: an unusable input failed the run,
    fault_field: str | None = None  # this one (as the caller names it), when known
    off_canary: bool = False  # a step failed on a canary: the run uses the baseline from now
