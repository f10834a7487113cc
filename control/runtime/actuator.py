"""The actuator: carries out a ``StepPlan``'s actions on the executor. It decides nothing.

Called by the driver right after ``step(now)``, on the event loop. It never blocks: executor
calls return at once, and what must wait (loads, fetching outputs of a finished run, inputs that
must be fetched first) runs as a task that puts its outcome into the driver's inbox.

* ``Dispatch`` of a model: an executor ``Batch`` on the same replica id, the step's inputs mapped
  (``mapping``); results come back through ``Completions``.
* ``Dispatch`` of a tool: ``router``/``segment`` run here (``tools``); ``vector_search`` runs on
  the executor's index replica of ``params["index"]`` on the device holding the embedding.
* ``LoadModel``/``EvictReplica``: executor load/unload; a load's outcome is ingested as
  ``ReplicaLoaded``/``ReplicaLoadFailed``.
* ``Reject``/``RunFinished``: the caller's ``RunHandle`` is resolved (outputs fetched first).
* ``Preempt``: its in-flight steps are cancelled on the executor (best effort: steps not yet
  started come back ``cancelled``; running ones finish and their results are ignored by the
  core).
* Rollouts: a rollout's loads and evictions are plain ``LoadModel``/``EvictReplica``.
  ``ReplicaRoutable`` and ``DrainReplica`` need nothing on the executor (the core stops routing
  to a draining replica and moves its queue; work in flight finishes; ``EvictReplica`` follows),
  so they are only logged. ``RolloutTransition`` is handed to ``on_rollout`` (when set) so the
  service layer can audit it and update the plan's status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from control import clock
from control.core.actions import (
    Dispatch,
    DrainReplica,
    EvictReplica,
    LoadModel,
    Preempt,
    Reject,
    ReplicaRoutable,
    RolloutTransition,
    RunFinished,
)
from control.core.events import ReplicaLoaded, ReplicaLoadFailed
from control.core.types import StepResult
from control.executor.protocol import Batch, Executor, ExecutorError, ModelRef
from control.runtime import mapping
from control.runtime.completions import Completions, call_now
from control.runtime.metrics import RuntimeMetrics
from control.runtime.outputs import OutputFetch
from control.runtime.state import Ingest, PendingBatch, Record, RunState, failed_item
from control.runtime.tools import HOST_TOOLS, ToolInputError
from control.runtime.types import RunResult, UsageRecord

log = logging.getLogger(__name__)

HOST = "host"


class Actuator:
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
    ) -> None:
        self.ex = executor
        self.done = completions
        self.runs = runs
        self.model_refs = model_refs
        self.index_replicas = index_replicas
        self.metrics = metrics
        self.put = put
        self.stream_tokens = stream_tokens
        self.payloads: dict[str, Mapping[str, Any]] = {}
        self.host_outputs: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.tasks: set[asyncio.Task] = set()
        #: runs what need not precede a run's answer (releases, metrics): see Completions.later
        self.later: Callable[..., None] = call_now
        #: Called with every ``RolloutTransition`` on the loop thread; must not block.
        self.on_rollout: Callable[[RolloutTransition], None] | None = None
        self.stores = mapping.Stores(
            self.payloads, self.host_outputs, completions.exec_held, self._kind_of
        )
        self._apply = {
            Dispatch: self._dispatch,
            LoadModel: self._load,
            EvictReplica: self._evict,
            Reject: self._reject,
            RunFinished: self._finished,
            Preempt: self._preempt,
            ReplicaRoutable: self._routable,
            DrainReplica: self._drain,
            RolloutTransition: self._rollout,
        }

    def _kind_of(self, run_id: str, node_id: str) -> str:
        run = self.runs.get(run_id)
        return run.kinds.get(node_id, "") if run else ""

    def spawn(self, coro) -> None:  # noqa: ANN001
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
            return  # MoveStep, StepRetried: bookkeeping inside the core
        try:
            handler(action, now)
        except Exception:  # one bad action must not stop the loop: log, go on
            log.exception("could not carry out %r", action)

    # ---- dispatch
    def _dispatch(self, d: Dispatch, now: float) -> None:
        if d.replica_id is None and d.tool in HOST_TOOLS:
            return self._host_tool(d, now)
        replica, device = d.replica_id, d.device_ids[0] if d.device_ids else "?"
        if d.replica_id is None:
            replica, device = self._index_replica(d)
        pb = PendingBatch(d, {i.idempotency_key: i for i in d.items}, now, device, replica)
        self.done.expect(pb)
        kind = d.tool or d.items[0].task
        ready, fetching = [], []
        for item in d.items:
            if replica is None:
                self._fail_item(
                    pb, item, f"no {d.tool} replica serves {item.params.get('index')!r}"
                )
                continue
            try:
                inputs = mapping.resolve_inputs(item, kind, self.stores)
            except (mapping.InputUnavailable, IndexError, TypeError) as err:
                self._fail_item(pb, item, f"input unavailable: {err}")
                continue
            run = self.runs.get(item.request_id)
            sampling = run.sampling if run is not None else None
            params = mapping.gen_params(item, kind, self.stream_tokens, sampling)
            target = fetching if mapping.pending_fetches(inputs) else ready
            back = run is not None and item.node_id in run.output_nodes
            target.append(mapping.exec_item(item, inputs, params, return_output=back))
        expected_ms = d.predicted_us / 1000.0 if d.predicted_us > 0 else None
        if ready:
            self.ex.submit(Batch(d.batch_id, replica, tuple(ready), expected_ms))
        if fetching:
            self.spawn(self._fetch_then_submit(d.batch_id, replica, fetching, expected_ms))

    def _index_replica(self, d: Dispatch) -> tuple[str | None, str]:
        index = str(d.items[0].params.get("index", ""))
        by_device = self.index_replicas.get(index, {})
        near = [r.device_id for b in d.items[0].inputs for r in b.refs if r.device_id]
        for dev in (*near, *sorted(by_device)):
            if dev in by_device:
                return by_device[dev], dev
        return None, HOST

    def _fail_item(self, pb: PendingBatch, item, error: str) -> None:  # noqa: ANN001
        """Fail one item of a dispatched batch before it reaches the executor (no replica, an
        input that cannot be resolved, a host tool refusing its input): its result goes to the
        core like any other, so the step fails or retries now instead of timing out."""
        for rec in self.done.settle(pb.dispatch.batch_id, item.idempotency_key,
                                    failed_item(item, error), clock.monotonic()):  # fmt: skip
            self.put(rec)

    async def _fetch_then_submit(
        self, batch_id: str, replica: str, items: list, expected_ms: float | None
    ) -> None:
        fetches = {f for it in items for f in mapping.pending_fetches(it.inputs)}
        fetched = {}
        for f in fetches:
            out = await asyncio.wrap_future(self.ex.fetch_output(f.run_id, f.exec_node))
            fetched[f] = out[f.field] if f.select is None else out[f.field][f.select]
        ready = [replace(it, inputs=mapping.substitute(it.inputs, fetched)) for it in items]
        self.ex.submit(Batch(batch_id, replica, tuple(ready), expected_ms))

    def _host_tool(self, d: Dispatch, now: float) -> None:
        pb = PendingBatch(d, {i.idempotency_key: i for i in d.items}, now, HOST, None)
        self.done.expect(pb)
        tool = HOST_TOOLS[d.tool or ""]
        for item in d.items:
            started = clock.perf_counter()
            try:
                inputs = mapping.resolve_inputs(item, tool.name, self.stores)
                out = tool.run(inputs, item.params)
            except (ToolInputError, mapping.InputUnavailable) as err:
                self._fail_item(pb, item, str(err))
                continue
            device_ms = (clock.perf_counter() - started) * 1000.0
            node = mapping.exec_node(item.node_id, item.chunk)
            self.host_outputs[(item.request_id, node)] = out.value
            pb.device_ms = max(pb.device_ms, device_ms)
            self._bill_tool(item, tool.name, out.input_tokens, device_ms)
            result = StepResult(
                key=item.key, ok=True, input_tokens=out.input_tokens,
                route_label=out.label, item_count=out.item_count,
            )  # fmt: skip
            for rec in self.done.settle(d.batch_id, item.idempotency_key, result, now):
                self.put(rec)

    def _bill_tool(self, item, tool: str, tokens: int, device_ms: float) -> None:  # noqa: ANN001
        if item.idempotency_key in self.done.billed:
            return
        self.done.billed.add(item.idempotency_key)
        run = self.runs.get(item.request_id)
        if run is None:
            return
        rec = UsageRecord(
            item.request_id, run.request.tenant_id, run.request.workflow, item.node_id,
            item.idempotency_key, item.attempt, tool, HOST, None, tokens, 0,
            int(device_ms * 1000), self.done.cost.cost_units(tool, tokens, 0), 1,
        )  # fmt: skip
        self.done.record_usage(run, rec)

    # ---- replicas
    def _load(self, a: LoadModel, now: float) -> None:
        ref = self.model_refs.get(a.model_key)
        if ref is None:
            reason = f"no local weights for {a.model_key} (declared only)"
            self.put(Ingest(ReplicaLoadFailed(a.replica_id, reason)))
            return
        self.spawn(self.load_replica(a.replica_id, ref, a.device_ids[0], None))

    async def load_replica(
        self, replica_id: str, ref: ModelRef, device: str, adopt: tuple[str, str] | None
    ) -> bool:
        """Load on the executor; ingest the outcome. ``adopt`` = (model key, pool) for a replica
        the core did not ask for (start-up placement, restoring after a worker restart)."""
        try:
            report = await asyncio.wrap_future(self.ex.load(replica_id, ref, device))
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
            self.put(Ingest(ReplicaLoaded(replica_id, adopt[0], (device,), adopt[1])))
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

    def _rollout(self, a: RolloutTransition, now: float) -> None:
        log.info("rollout %s: %s -> %s (%s)", a.plan_id, a.from_state or "-", a.to_state, a.reason)
        if self.on_rollout is not None:
            self.on_rollout(a)

    # ---- runs
    def _reject(self, a: Reject, now: float) -> None:
        run = self.runs.pop(a.request_id, None)
        self.payloads.pop(a.request_id, None)
        if run is not None:
            self.metrics.run_done(run.request.workflow, "rejected", now - run.submitted_at)
            run.handle.resolve(
                RunResult(a.request_id, "rejected", {}, a.reason, a.reason, (), a.retry_after_s)
            )

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

    def _finished(self, a: RunFinished, now: float) -> None:
        """Settle the run now when its outputs are at hand (the common case: a worker's output
        came back with its result); otherwise once the fetches from its workers return."""
        if a.status != "succeeded":
            return self._settle_run(a, {}, a.error)
        try:
            fetch = OutputFetch(a.outputs, self.stores, self.ex)
            outputs = fetch.values() if fetch.ready else None
        except Exception as err:  # an output lost with its worker: the run fails, loop lives
            return self._settle_run(a, {}, f"output unavailable: {err}")
        if outputs is None:
            return self.spawn(self._settle_later(a, fetch))
        self._settle_run(a, outputs, a.error)

    async def _settle_later(self, a: RunFinished, fetch: OutputFetch) -> None:
        try:
            outputs, error = await fetch.wait(), a.error
        except Exception as err:
            outputs, error = {}, f"output unavailable: {err}"
        self._settle_run(a, outputs, error)

    def _settle_run(self, a: RunFinished, outputs: dict[str, Any], error: str | None) -> None:
        """Release everything the run held and resolve its handle (its end reaches the caller)."""
        run = self.runs.pop(a.request_id, None)
        status = a.status if error is None or a.status != "succeeded" else "failed"
        if status != "succeeded":
            outputs = {}
        self.later(self._release, a.request_id)  # nothing reads a finished run's leftovers
        if run is None:
            return
        wall_s = clock.monotonic() - run.submitted_at
        self.later(self.metrics.run_done, run.request.workflow, status, wall_s)
        result = RunResult(a.request_id, status, outputs, error, a.reason, tuple(run.usage))
        run.handle.resolve(result)

    def _release(self, run_id: str) -> None:
        """Drop what a finished run left: its outputs on the executor and here, its payload."""
        self.ex.release_run(run_id)
        self.payloads.pop(run_id, None)
        for key in [k for k in self.host_outputs if k[0] == run_id]:
            del self.host_outputs[key]
        for key in [k for k in self.done.exec_held if k[0] == run_id]:
            self.done.exec_held.discard(key)
