"""``LiveRuntime``: the facade the API uses to run workflows on the real executor.

``await start()`` starts the executor's workers, builds the core with ``build_core`` (the same
wiring as the twin), loads the initial replicas and index replicas and starts the driver.
``submit_run`` returns a :class:`RunHandle` at once; ``snapshot()`` is the core's view;
``await ingest(event)`` applies a config change (raises the core's refusal); ``await stop()``
ends everything. All methods are called on the runtime's event loop.

The usage sink receives one :class:`UsageRecord` per step that ran (exactly once per
idempotency key), on the loop thread, so the API can append ledger entries. ``on_rollout``
receives every ``RolloutTransition`` and ``CanaryTransition`` the core reports, on the loop
thread (it must not block); ``on_device_joined`` every device that joins the fleet,
``on_device_left`` each gone for good (:mod:`control.runtime.joins`), likewise. Time is read
from the runtime's :class:`~control.clock.Clock`, which its driver and actuator share (runs'
submission and wall times, the driver's ``now``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from control.clock import SYSTEM_CLOCK, Clock
from control.core.actions import RolloutTransition
from control.core.assembly import CoreBlueprint, build_core
from control.core.events import CancelRun, DeviceUp
from control.core.latency import LatencyModel
from control.executor.heap import freeze_startup_heap
from control.executor.protocol import Executor, ModelRef
from control.runtime import durable, joins
from control.runtime.actuator import Actuator
from control.runtime.completions import Completions
from control.runtime.driver import Driver
from control.runtime.metrics import RuntimeMetrics
from control.runtime.state import ExecEvent, IndexSpec, Ingest, Record, RunState, Submit
from control.runtime.types import RunHandle, RunRequest, RunResult, StreamDelta, UsageRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InitialReplica:
    """A replica to load at start-up (the active placement, or one per local model)."""

    model_key: str
    device_id: str
    pool: str = "hot"
    group: tuple[str, ...] = ()  # all its devices when it spans several (tensor parallel)


@dataclass(frozen=True)
class RuntimeConfig:
    stream_tokens: bool = field(default=True, metadata={"help": "stream generate tokens"})
    sample_every_s: float = field(default=1.0, metadata={"help": "metrics sampling interval"})
    ready_timeout_s: float = field(default=120.0, metadata={"help": "wait for workers at start"})
    indexes: tuple[IndexSpec, ...] = field(
        default=(), metadata={"help": "vector indexes, one replica on every device"}
    )
    freeze_startup_heap: bool = field(
        default=True,
        metadata={
            "help": "once per process, when the first runtime has started, move every object "
            "alive then (modules, torch and transformers, the wiring) out of the garbage "
            "collector's generations (gc.freeze): a full collection otherwise rescans ~300k "
            "startup objects (~170 ms here) and stalls the driver while a backlog grows"
        },
    )
    read_executor_on_loop: bool = field(
        default=True,
        metadata={
            "help": "the executor delivers its events on the driver's loop (the local executor "
            "reads its worker pipes there): each completion is handled in the loop turn it "
            "arrives, without a reader thread's two hand-offs"
        },
    )


class LiveRuntime:
    def __init__(
        self,
        blueprint: CoreBlueprint,
        latency: LatencyModel,
        executor: Executor,
        model_refs: Mapping[str, ModelRef],
        placement: Sequence[InitialReplica] = (),
        config: RuntimeConfig = RuntimeConfig(),
        metrics: RuntimeMetrics | None = None,
        *,
        on_rollout: Callable[[RolloutTransition], None] | None = None,
        on_device_joined: joins.OnJoined | None = None,
        on_device_left: joins.OnLeft | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.blueprint, self.clock, self.latency = blueprint, clock, latency
        self.on_rollout, self.on_device_joined = on_rollout, on_device_joined
        self.on_device_left = on_device_left
        self.executor, self.config, self.metrics = executor, config, metrics or RuntimeMetrics()
        self.model_refs, self.placement = dict(model_refs), tuple(placement)
        self.runs: dict[str, RunState] = {}
        self.index_replicas: dict[str, dict[str, str]] = {}
        self._restarts: dict[str, int] = {}
        self._tasks: list[asyncio.Task] = []
        self._node_cache: dict[str, tuple[dict[str, str], dict[str, str], frozenset[str]]] = {}
        self._node_cache_of: object = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._listening = False  # executor events reach the driver (from start to stop)
        self.driver: Driver | None = None
        self.actuator: Actuator | None = None

    # ---- lifecycle
    async def start(
        self,
        *,
        usage_sink: Callable[[UsageRecord], None] | None = None,
        after_turn: Sequence[Callable[[], None]] = (),
    ) -> None:
        """Start workers, core, driver; load the initial replicas (waits for them).

        The hooks are those of whoever owns the runtime (the inference service), given here
        because the owner is built over the runtime: ``usage_sink`` is told each step that ran
        (its bill), and ``after_turn`` runs at the end of every driver turn on the loop thread
        (see ``Driver.after_turn``: the run log's commit of a turn's run ends starts there)."""
        loop = asyncio.get_running_loop()
        self._loop, self._loop_thread = loop, threading.get_ident()
        on_loop = self.config.read_executor_on_loop
        # the loop reads the worker pipes: no hop at all, and what was read is settled in the
        # same loop iteration (the turn runs once the pipes are read)
        self.executor.start(self._executor_event, loop=loop if on_loop else None,
                            after_events=self._executor_read if on_loop else None)  # fmt: skip
        ready = await asyncio.to_thread(self.executor.wait_ready, self.config.ready_timeout_s)
        if not ready:
            raise RuntimeError("executor workers did not start in time")
        joins.adopt(self)  # the executor's cluster devices the blueprint lacks
        core = build_core(self.blueprint, self.latency, self.clock.monotonic())
        # metrics and releases wait until the callers a turn answers have been answered
        done = Completions(self.runs, self.blueprint.cost, self.metrics, usage_sink,
                           self._worker_down, self._worker_up, later=self._later,
                           on_joined=partial(joins.join, self),
                           on_gone=partial(joins.leave, self))  # fmt: skip
        self.actuator = Actuator(self.executor, done, self.runs, self.model_refs,
                                 self.index_replicas, self.metrics, self._put,
                                 self.config.stream_tokens, later=self._later,
                                 on_rollout=self.on_rollout, clock=self.clock)  # fmt: skip
        self.driver = Driver(core, self.actuator, done, self.metrics, self._refused,
                             self.config.sample_every_s, after_turn=list(after_turn),
                             clock=self.clock)  # fmt: skip
        self._tasks = [loop.create_task(self.driver.run())]
        self._listening = True
        await asyncio.gather(*self._initial_loads())
        if self.config.freeze_startup_heap:
            freeze_startup_heap()

    def _put(self, record: Record) -> None:  # the actuator's (the driver is built after it)
        self.driver.put(record)  # type: ignore[union-attr]

    def _later(self, fn: Callable[..., None], *args: object) -> None:  # Driver.later, likewise
        self.driver.later(fn, *args)  # type: ignore[union-attr]

    def _executor_event(self, event: object) -> None:
        """An executor event, into the driver's inbox (one hop, no task) from the driver's
        start to ``stop``; before it, only the workers' first heartbeats come."""
        if not self._listening:
            return
        put = self.driver.put  # type: ignore[union-attr]
        if threading.get_ident() == self._loop_thread:
            put(ExecEvent(event))
        else:
            self._loop.call_soon_threadsafe(put, ExecEvent(event))  # type: ignore[union-attr]

    def _executor_read(self) -> None:
        """The executor has read its pipes: the driver takes its turn now."""
        if self._listening:
            self.driver.turn_now()  # type: ignore[union-attr]

    def _initial_loads(self) -> list[Coroutine[Any, Any, object]]:
        assert self.actuator is not None
        loads: list[Coroutine[Any, Any, object]] = []
        for i, p in enumerate(self.placement):
            rid = f"{p.model_key}@{p.device_id}/init{i}"
            ref = self.model_refs[p.model_key]
            adopt = (p.model_key, p.pool)
            loads.append(self.actuator.load_replica(rid, ref, p.device_id, adopt, p.group))
        for index in self.config.indexes:
            for dev in sorted(d.device_id for d in self.blueprint.devices):
                loads.append(self._load_index(index, dev, 0))
        return loads

    async def _load_index(self, index: IndexSpec, device: str, gen: int) -> None:
        rid = f"index:{index.name}@{device}/{gen}"
        ref = ModelRef(f"index:{index.name}", "vector_search", "tool",
                       options={"documents": list(index.documents), "embed_model": index.embed_ref})  # fmt: skip
        report = await asyncio.wrap_future(self.executor.load(rid, ref, device))
        if report.ok:
            self.index_replicas.setdefault(index.name, {})[device] = rid
        else:
            log.warning("index %s on %s did not load: %s", index.name, device, report.reason)

    async def stop(self) -> None:
        """Stop the driver and the executor; unfinished runs resolve as failed."""
        self._listening = False
        if self.driver is not None:
            self.driver.stop()
            await asyncio.wait(self._tasks[:1], timeout=5)
        for task in [*self._tasks, *(self.actuator.tasks if self.actuator else ())]:
            task.cancel()
        await asyncio.to_thread(self.executor.stop)
        for run in list(self.runs.values()):
            rid = run.request.request_id
            run.handle.resolve(RunResult(rid, "failed", {}, "runtime stopped", "runtime stopped"))
        self.runs.clear()

    # ---- the API's side
    def submit_run(self, run: RunRequest) -> RunHandle:
        """Queue a run; returns its handle at once. A request id already running is refused
        (the handle resolves ``failed`` naming it)."""
        assert self.driver is not None and self.actuator is not None, "call start() first"
        loop = asyncio.get_running_loop()
        rid = run.request_id
        handle = RunHandle(rid, loop)
        if rid in self.runs:
            handle.resolve(RunResult(rid, "failed", {}, f"request_id {rid!r} is already running",
                                     "duplicate request"))  # fmt: skip
            return handle
        kinds, models, outs = self._nodes(run.request.workflow)
        self.runs[rid] = RunState(handle, run.request, kinds, models, self.clock.monotonic(),
                                  output_nodes=outs, sampling=run.sampling,
                                  durable=run.durable)  # fmt: skip
        self.actuator.payloads[rid] = dict(run.payload)
        self.driver.put(Submit(durable.seed(run, self.actuator.host_outputs)))
        return handle

    def stream(self, run_id: str) -> AsyncIterator[StreamDelta]:
        """Token deltas of a running run (raises KeyError for an unknown run)."""
        return self.runs[run_id].handle.stream()

    def snapshot(self):  # noqa: ANN201 - CoreSnapshot
        assert self.driver is not None, "call start() first"
        return self.driver.snapshot()

    def devices_up(self) -> int:
        """Devices the core holds up now, without building a snapshot."""
        assert self.driver is not None, "call start() first"
        return self.driver.devices_up()

    def devices_restarting(self) -> int:
        """Devices down only while their worker restarts (not those gone for good)."""
        return len(self.actuator.done.down) if self.actuator is not None else 0

    async def ingest(self, event: object) -> None:
        """Apply a config change at the next instant; raises what the core refused."""
        assert self.driver is not None, "call start() first"
        reply = asyncio.get_running_loop().create_future()
        self.driver.put(Ingest(event, reply))
        await reply

    async def cancel_run(self, run_id: str, reason: str = "cancelled by its caller") -> None:
        """Ask the core to end ``run_id`` as cancelled (idempotent; its handle resolves)."""
        await self.ingest(CancelRun(run_id, reason))

    # ---- internals
    def _nodes(self, workflow: str) -> tuple[dict[str, str], dict[str, str], frozenset[str]]:
        """Node kinds, model keys and output nodes of ``workflow`` (computed once each)."""
        if self._node_cache_of is not self.blueprint.workflows:  # live config replaced them
            self._node_cache, self._node_cache_of = {}, self.blueprint.workflows
        if (found := self._node_cache.get(workflow)) is not None:
            return found
        found = {}, {}, frozenset()
        for spec in self.blueprint.workflows:
            if spec.workflow == workflow:
                outs = frozenset(ref.split(".", 1)[0] for ref in spec.outputs.values())
                found = ({n.node_id: n.kind for n in spec.nodes},
                         {n.node_id: n.model for n in spec.nodes if n.model}, outs)  # fmt: skip
        self._node_cache[workflow] = found
        return found

    def _refused(self, request_id: str, reason: str) -> None:
        if (run := self.runs.pop(request_id, None)) is not None:
            run.handle.resolve(RunResult(request_id, "rejected", {}, reason, reason))

    def _worker_down(self, device_id: str) -> None:
        for by_device in self.index_replicas.values():
            by_device.pop(device_id, None)

    def _worker_up(self, device_id: str) -> list[Record]:
        """A worker restarted: the device is up again. The core decides which replicas go
        back on it (``control.core.restore``: its ``LoadModel`` actions); the runtime only
        reloads the vector indexes, which the core does not place."""
        specs = {d.device_id: d for d in self.blueprint.devices}
        if device_id not in specs or self.actuator is None:
            return []
        n = self._restarts[device_id] = self._restarts.get(device_id, 0) + 1
        for index in self.config.indexes:
            self.actuator.spawn(self._load_index(index, device_id, n))
        return [Ingest(DeviceUp(specs[device_id]))]
