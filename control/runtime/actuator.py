"""The actuator: carries out a ``StepPlan``'s actions on the executor. It decides nothing.

Called by the driver right after ``step(now)``, on the event loop. It never blocks: executor
calls return at once, and what must wait (loads, fetching outputs of a finished run, inputs that
must be fetched first) runs as a task that puts its outcome into the driver's inbox.

* ``Dispatch``: a model step becomes an executor ``Batch``; ``router``/``segment`` run here;
  ``vector_search`` runs on an index replica (``dispatch.Dispatcher``).
* ``LoadModel``/``EvictReplica``: executor load/unload; a load's outcome is ingested as
  ``ReplicaLoaded``/``ReplicaLoadFailed``.
* ``Reject``/``RunFinished``: the caller's ``RunHandle`` is resolved, outputs fetched first
  (``run_ends.RunEnds``).
* ``Preempt``: its in-flight steps are cancelled on the executor (best effort: steps not yet
  started come back ``cancelled``; running ones finish and their results are ignored by the
  core).
* ``StepRetried`` under a fresh key (a timeout) and ``StepPreempted`` (borrowed headroom taken
  back): the abandoned attempt is cancelled, counted and noted on the run (``reissues``).
* Rollouts: a rollout's loads and evictions are plain ``LoadModel``/``EvictReplica``.
  ``ReplicaRoutable`` and ``DrainReplica`` need nothing on the executor (the core stops routing
  to a draining replica and moves its queue; work in flight finishes; ``EvictReplica`` follows),
  so they are only logged. ``RolloutTransition`` is handed to ``on_rollout`` (given to the
  constructor) so the service layer can audit it and update the plan's status; so is
  ``CanaryTransition`` (a canary set, ended or rolled back by the core), to be audited.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from control.clock import SYSTEM_CLOCK, Clock
from control.core.actions import (
    CanaryTransition,
    Dispatch,
    DrainReplica,
    EvictReplica,
    LoadModel,
    MoveStep,
    Preempt,
    Reject,
    ReplicaRoutable,
    RolloutTransition,
    RunFinished,
    StepPreempted,
    StepRetried,
)
from control.core.events import ReplicaLoaded, ReplicaLoadFailed
from control.executor.protocol import Executor, ExecutorError, ModelRef
from control.executor.protocol.executor import replica_devices
from control.runtime import mapping
from control.runtime.completions import Completions, call_now
from control.runtime.dispatch import HOST, Dispatcher
from control.runtime.metrics import RuntimeMetrics
from control.runtime.reissues import Reissues
from control.runtime.run_ends import RunEnds
from control.runtime.state import Ingest, Record, RunState
from control.runtime.timeline import both

log = logging.getLogger(__name__)

__all__ = ["HOST", "Actuator"]


class Actuator:
    """Carries out plans on ``executor``. ``put`` queues records for the driver; ``later``
    runs bookkeeping that need not precede a run's answer (``Driver.later``; at once by
    default); ``on_rollout`` is called with every ``RolloutTransition`` and
    ``CanaryTransition`` on the loop thread and must not block; ``clock`` is where time is read (host tools' durations, runs' wall
    time)."""

    def __init__(
        self,
        executor: Executor,
        completions: Completions,
        runs: dict[str, RunState],
        model_refs: Mapping[str, ModelRef],
        index_replicas: dict[str, dict[str, str]],  # index name -> device id -> replica id
        metrics: RuntimeMetrics,
        put: Callable[[Record], None],
        stream_tokens: bool = True,
        *,
        later: Callable[..., None] = call_now,
        on_rollout: Callable[[RolloutTransition], None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.ex = executor
        self.model_refs = model_refs
        self.put = put
        self.on_rollout = on_rollout
        self.done = completions
        self.payloads: dict[str, Mapping[str, Any]] = {}
        self.host_outputs: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.tasks: set[asyncio.Task] = set()
        self.stores = mapping.Stores(
            self.payloads, self.host_outputs, completions.exec_held, self._kind_of
        )
        self._runs = runs
        self.dispatcher = Dispatcher(executor, completions, runs, self.stores, index_replicas,
                                     put, self.spawn, stream_tokens=stream_tokens, clock=clock)  # fmt: skip
        self.run_ends = RunEnds(executor, completions, runs, self.stores, metrics, self.spawn,
                                later=later, clock=clock)  # fmt: skip
        reissues = Reissues(executor, completions, runs, metrics)
        book = completions.timeline
        self._apply: dict[type, Callable[[Any, float], None]] = {
            Dispatch: both(book.dispatched, self.dispatcher.dispatch),
            MoveStep: book.moved,
            LoadModel: self._load,
            EvictReplica: self._evict,
            Reject: self.run_ends.reject,
            RunFinished: self.run_ends.finished,
            Preempt: self._preempt,
            ReplicaRoutable: self._routable,
            DrainReplica: self._drain,
            RolloutTransition: self._rollout,
            StepRetried: both(book.retried, reissues.retried),
            StepPreempted: both(book.preempted, reissues.preempted),
            CanaryTransition: self._rollout,
        }

    def _kind_of(self, run_id: str, node_id: str) -> str:
        run = self._runs.get(run_id)
        return run.kinds.get(node_id, "") if run else ""

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run ``coro`` as a task the runtime keeps until it ends (cancelled at stop)."""
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def apply(self, actions, now: float) -> None:  # noqa: ANN001
        """Carry out every action of a plan, in plan order, except that run ends
        (``RunFinished``) come after all the others. Why: a plan that ends runs usually also
        sends their replica its next batch, and answering callers (settling outputs, resolving
        handles, their callbacks) took milliseconds for a large batch while the device sat
        idle. A run's end never feeds another action of its plan: its steps are all done, and
        the batches sent belong to other runs."""
        ends = []
        for action in actions:
            if type(action) is RunFinished:
                ends.append(action)
            else:
                self._carry_out(action, now)
        for action in ends:
            self._carry_out(action, now)

    def _carry_out(self, action, now: float) -> None:  # noqa: ANN001
        handler = self._apply.get(type(action))
        if handler is None:
            return  # bookkeeping inside the core
        try:
            handler(action, now)
        except Exception:  # one bad action must not stop the loop: log, go on
            log.exception("could not carry out %r", action)

    # ---- replicas
    def _load(self, a: LoadModel, now: float) -> None:
        ref = self.model_refs.get(a.model_key)
        if ref is None:
            reason = f"no local weights for {a.model_key} (declared only)"
            self.put(Ingest(ReplicaLoadFailed(a.replica_id, reason)))
            return
        self.spawn(self.load_replica(a.replica_id, ref, a.device_ids[0], None, a.device_ids))

    async def load_replica(self, replica_id: str, ref: ModelRef, device: str,
                           adopt: tuple[str, str] | None, group: tuple[str, ...] = ()) -> bool:  # fmt: skip
        """Load on the executor; ingest the outcome. ``adopt`` = (model key, pool) for a replica
        the core did not ask for (start-up placement, restoring after a worker restart).
        ``group``: all the devices of a multi-device (tensor parallel) replica: it holds them all."""
        try:
            report = await asyncio.wrap_future(self.ex.load(replica_id, ref, device, group=group))
        except ExecutorError as err:
            self.put(Ingest(ReplicaLoadFailed(replica_id, str(err))))
            return False
        if not report.ok:
            if adopt is None:
                self.put(Ingest(ReplicaLoadFailed(replica_id, report.reason)))
            log.warning("load of %s on %s failed: %s", replica_id, device, report.reason)
            return False
        if adopt is None:
            self.put(Ingest(ReplicaLoaded(replica_id)))
        else:
            self.put(Ingest(ReplicaLoaded(replica_id, adopt[0], replica_devices(device, group),
                                          adopt[1])))  # fmt: skip
        return True

    def _evict(self, a: EvictReplica, now: float) -> None:
        try:
            self.ex.unload(a.replica_id)
        except ExecutorError as err:
            log.info("evict %s: %s", a.replica_id, err)

    # ---- rollouts
    def _routable(self, a: ReplicaRoutable, now: float) -> None:
        log.info("replica %s of %s is routable: %s", a.replica_id, a.model_key, a.reason)

    def _drain(self, a: DrainReplica, now: float) -> None:
        # Nothing to do on the executor: in-flight batches finish, the core evicts it after.
        log.info("draining %s of %s on %s: %s", a.replica_id, a.model_key,
                 ",".join(a.device_ids), a.reason)  # fmt: skip

    def _rollout(self, a: RolloutTransition | CanaryTransition, now: float) -> None:
        what = a.plan_id if isinstance(a, RolloutTransition) else f"canary {a.canary_key}"
        log.info("rollout %s: %s -> %s (%s)", what, a.from_state or "-", a.to_state, a.reason)
        if self.on_rollout is not None:
            self.on_rollout(a)

    # ---- runs
    def _preempt(self, a: Preempt, now: float) -> None:
        """Cancel the run's steps in flight that have not started (best effort)."""
        log.info("preempted %s (%d step(s) in flight cancelled): %s", a.request_id,
                 len(a.cancel_keys), a.reason)  # fmt: skip
        wanted = set(a.cancel_keys)
        keys = [
            key
            for pb in self.done.pending.values()
            for key, item in pb.items.items()
            if item.key in wanted and item.key not in pb.results
        ]
        cancel = getattr(self.ex, "cancel", None)  # an executor without cancel: results ignored
        if keys and cancel is not None:
            cancel(keys)
