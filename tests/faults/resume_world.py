"""A world for restart tests of multi-step runs: the inference service over a real live runtime
(core, driver, two CPU workers with tiny models) on one SQLite database, and an executor that
counts what it is asked (loads, steps per node) and can hold a node's batches back for good (a
frozen device, deterministic: no sleep decides what has finished at the "crash")."""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from control.core.assembly import CoreBlueprint
from control.core.batching.size_delay import SizeDelayConfig
from control.core.context import CoreConfig
from control.core.dag.spec import dag_from_dict
from control.core.latency import TableLatencyModel
from control.core.tenancy.base import TenancyConfig, TenantSpec
from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.protocol import DeviceInfo
from control.runtime.live import LiveRuntime, RuntimeConfig
from control.runtime.local_fleet import device_specs
from control.runtime.state import IndexSpec
from control.services import build_services
from control.services.inference import InferenceService, RunCall
from db.session import make_engine, make_session_factory
from tests.runtime.conftest import BERT, DOCS, MODELS, PLACEMENT, RAG, REFS

torch.set_num_threads(1)

#: embed -> search (host tool) -> rerank -> gen, under the service's ``name:version`` key
SPEC = {**RAG, "workflow": "rag:1"}


class CountingExecutor:
    """A ``LocalExecutor`` that counts replica loads and step submissions per node, and never
    passes on a batch of a node in ``hold`` (its steps stay in flight until the "crash").
    With ``hold_up`` on, a restarted worker's ``WorkerUp`` waits for :meth:`release_up` (the
    runtime hears of the device coming back only then)."""

    def __init__(self, inner: LocalExecutor, hold: frozenset[str] = frozenset()) -> None:
        self.inner = inner
        self.hold = hold
        self.steps: Counter[str] = Counter()  # node -> items submitted (and run)
        self.loads: Counter[tuple[str, str]] = Counter()  # (model key, device) -> loads
        self.held = asyncio.Event()  # a batch of a held node came
        self.hold_up = False
        self.held_up: list[Any] = []  # WorkerUp events held back
        self._deliver: Any = None

    def start(self, on_event: Any = None, *, loop: Any = None, after_events: Any = None) -> None:
        def deliver(event: Any) -> None:
            if self.hold_up and type(event).__name__ == "WorkerUp":
                self.held_up.append(event)
                return
            on_event(event)

        self._deliver = (on_event, after_events)
        self.inner.start(deliver, loop=loop, after_events=after_events)

    def release_up(self) -> None:
        """(loop thread) Deliver the held ``WorkerUp`` events and deliver the next at once."""
        on_event, after_events = self._deliver
        self.hold_up = False
        held, self.held_up = self.held_up, []
        for event in held:
            on_event(event)
        if after_events is not None:
            after_events()

    def submit(self, batch: Any) -> None:
        nodes = {item.step.node_id for item in batch.items}
        if nodes & self.hold:
            self.held.set()
            return
        for item in batch.items:
            self.steps[item.step.node_id] += 1
        self.inner.submit(batch)

    def load(self, replica_id: str, model_ref: Any, device_id: str, **kw: Any) -> Any:
        self.loads[(model_ref.name, device_id)] += 1
        return self.inner.load(replica_id, model_ref, device_id, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


DEVICES = [DeviceInfo(f"cpu:{i}", "cpu", i, 512, i % 2) for i in range(2)]


def executor(cache: Path, hold: frozenset[str] = frozenset()) -> CountingExecutor:
    config = ExecutorConfig(heartbeat_s=0.5, cache_dir=str(cache), use_cuda=False,
                            poll_queue=False)  # fmt: skip
    return CountingExecutor(LocalExecutor(config, DEVICES), hold)


def runtime(ex: CountingExecutor) -> LiveRuntime:
    blueprint = CoreBlueprint(
        devices=device_specs(DEVICES),
        models=MODELS,
        workflows=(dag_from_dict(SPEC),),
        tenancy=TenancyConfig(tenants=(TenantSpec("acme", 1),)),
        core_config=CoreConfig(batching_config=SizeDelayConfig(max_queue_delay_s=0.05)),
    )
    config = RuntimeConfig(indexes=(IndexSpec("docs", DOCS, BERT),), sample_every_s=0.2)
    return LiveRuntime(blueprint, TableLatencyModel(), ex, REFS, PLACEMENT, config)  # type: ignore[arg-type]


def database(tmp_path: Path, template: Path) -> tuple[Any, Any, int]:
    """(session factory, services, tenant id) of a migrated SQLite file with the workflow."""
    shutil.copyfile(template, tmp_path / "l.db")
    factory = make_session_factory(make_engine(f"sqlite:///{tmp_path / 'l.db'}"))
    services = build_services(factory)
    tenant = services.tenants.create("t", name="acme", weight=1, priority_class="critical")
    services.workflows.create("t", name="rag", version="1", spec=SPEC, status="active")
    return factory, services, tenant.id


async def service(db: tuple, ex: CountingExecutor, **options: Any) -> InferenceService:
    factory, services, _ = db
    inference = InferenceService(services, runtime(ex), factory, model_ids={}, device_ids={},
                                 **options)  # fmt: skip
    await inference.start()
    return inference


def call(tenant_id: int, key: str, query: str = "where is Paris") -> RunCall:
    return RunCall(tenant_id=tenant_id, tenant_name="acme", actor="t", workflow_name="rag",
                   workflow_version="1", payload={"query": query}, body_hash=f"h-{query}",
                   idempotency_key=key)  # fmt: skip


async def crash(inference: InferenceService) -> None:
    """The process dies: nothing more is committed (the writer refuses every write), its
    workers end with their outputs; the rows stay as the last commit left them."""
    inference.writer._stopping = True
    await inference.runtime.stop()


async def until_ended(inference: InferenceService, rid: str, timeout_s: float = 60) -> Any:
    """The run's row once it has ended (bounded wait on the database)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        await inference.writer.flush()
        found = inference.services.requests.get(rid)
        if found.status not in ("queued", "running"):
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {rid} did not end within {timeout_s} s")


def ledger(services: Any, rid: str) -> list[tuple[str, str, int]]:
    return sorted((e.node_id, e.attempt, e.input_tokens)
                  for e in services.usage.list(request_id=rid))  # fmt: skip
