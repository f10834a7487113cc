"""The inference service's write path with a fake runtime (no executor): a step is billed when
the runtime reports it, not when the run ends; an accepted request survives a restart and is
then closed as failed with the billing of its completed steps intact."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from datetime import timedelta

import pytest

from control.core.dag.spec import dag_from_dict
from control.core.tenancy.base import TenancyConfig, TenantSpec
from control.runtime.types import RunHandle, RunResult, UsageRecord
from control.services import build_services
from control.services.errors import IdempotencyConflict, UnknownReference
from control.services.inference import InferenceService, RunCall
from db.session import make_engine, make_session_factory
from tests.support.clock import ManualClock

SPEC = {"workflow": "pipe:1", "inputs": {"text": "text"}, "outputs": {"vec": "embed.embedding"},
        "nodes": [{"id": "embed", "task": "embed", "model": "m:1"}],
        "edges": [{"from": "input.text", "to": "embed.text"}]}  # fmt: skip


@dataclass(frozen=True)
class _Device:
    device_id: str
    up: bool = True


@dataclass(frozen=True)
class _Snapshot:
    devices: tuple[_Device, ...] = (_Device("cpu:0"),)


@dataclass(frozen=True)
class _Blueprint:
    workflows: tuple = (dag_from_dict(SPEC),)
    models: tuple = ()
    tenancy: TenancyConfig = TenancyConfig(tenants=(TenantSpec("acme", 1, "critical"),))


class FakeRuntime:
    """Holds every run open until the test resolves it; reports usage through the sink."""

    def __init__(self) -> None:
        self.blueprint = _Blueprint()
        self.usage_sink = None
        self.handles: dict[str, RunHandle] = {}

    async def start(self, *, usage_sink, after_turn=()) -> None:  # noqa: ANN001
        self.usage_sink = usage_sink

    async def stop(self) -> None:
        for rid, handle in self.handles.items():
            handle.resolve(RunResult(rid, "failed", {}, "runtime stopped", "runtime stopped"))

    def snapshot(self) -> _Snapshot:
        return _Snapshot()

    def devices_up(self) -> int:
        return sum(1 for d in self.snapshot().devices if d.up)

    def submit_run(self, run) -> RunHandle:
        handle = RunHandle(run.request_id, asyncio.get_running_loop())
        self.handles[run.request_id] = handle
        return handle

    def step_done(self, rid: str, node: str, tokens: int) -> UsageRecord:
        usage = UsageRecord(rid, "acme", "pipe:1", node, f"{rid}/{node}", 1, "m:1", "cpu:0",
                            None, tokens, 0, 1500, tokens * 2, 1)  # fmt: skip
        self.usage_sink(usage)
        return usage


@pytest.fixture
def db(tmp_path, _sqlite_template):
    shutil.copyfile(_sqlite_template, tmp_path / "l.db")
    factory = make_session_factory(make_engine(f"sqlite:///{tmp_path / 'l.db'}"))
    services = build_services(factory)
    tenant = services.tenants.create("t", name="acme", weight=1, priority_class="critical")
    services.workflows.create("t", name="pipe", version="1", spec=SPEC, status="active")
    services.workflows.create("t", name="old", version="1", spec=SPEC, status="retired")
    return factory, services, tenant.id


def call(tenant_id: int, key: str | None = None, body: str = "h") -> RunCall:
    return RunCall(tenant_id=tenant_id, tenant_name="acme", actor="t", workflow_name="pipe",
                   workflow_version="1", payload={"text": "x"}, body_hash=body,
                   idempotency_key=key)  # fmt: skip


async def _service(db, runtime: FakeRuntime, **options) -> InferenceService:  # noqa: ANN003
    factory, services, _ = db
    inference = InferenceService(services, runtime, factory, model_ids={}, device_ids={},
                                 **options)  # fmt: skip
    await inference.start()
    return inference


async def test_steps_are_billed_as_they_end_and_survive_a_restart(db) -> None:
    factory, services, tenant = db
    runtime = FakeRuntime()
    inference = await _service(db, runtime)
    started = await inference.submit(call(tenant, "k1"))
    rid = started.request.id
    assert services.requests.get(rid).status == "queued"  # durable before the caller hears
    assert started.request.priority_class == "critical"  # the tenant's class, from memory
    runtime.step_done(rid, "embed", 7)
    await inference.writer.flush()
    assert [e.input_tokens for e in services.usage.list(request_id=rid)] == [7]  # mid-run
    # A crash: the process dies without settling the run (the writer is just dropped).
    inference.writer._stopping = True  # takes nothing more, commits nothing more
    restarted = await _service(db, FakeRuntime(), resume_max_age_s=0)  # failed, not resumed
    assert restarted.recovered == [rid]
    after = services.requests.get(rid)
    assert after.status == "failed" and "restarted" in after.error
    assert services.usage.totals(request_id=rid)["input_tokens"] == 7
    await restarted.stop()


async def test_a_settled_run_keeps_usage_equal_to_the_ledger_and_per_node_figures(db) -> None:
    _, services, tenant = db
    runtime = FakeRuntime()
    inference = await _service(db, runtime)
    rid = (await inference.submit(call(tenant))).request.id
    usage = runtime.step_done(rid, "embed", 5)
    runtime.handles[rid].resolve(RunResult(rid, "succeeded", {"vec": [0.5] * 3}, None, "ok",
                                           (usage,)))  # fmt: skip
    record = await inference.wait(rid, 5)
    stored = services.requests.get(rid)
    assert record.status == stored.status == "succeeded"
    assert stored.result["usage"] == {k: v for k, v in services.usage.totals(request_id=rid)
                                      .items()}  # fmt: skip
    node = stored.result["nodes"]["embed"]
    assert node["outputs"] == {"embedding": [0.5] * 3} and node["device_ms"] == 2
    assert inference.recent(1)[0].id == rid
    await inference.stop()


async def test_keys_and_workflows_are_checked(db) -> None:
    _, services, tenant = db
    inference = await _service(db, FakeRuntime())
    first = await inference.submit(call(tenant, "same"))
    again = await asyncio.gather(*(inference.submit(call(tenant, "same")) for _ in range(4)))
    assert all(s.existing and s.request.id == first.request.id for s in again)
    with pytest.raises(IdempotencyConflict):
        await inference.submit(call(tenant, "same", body="other"))
    bad = RunCall(**{**call(tenant).__dict__, "workflow_name": "old"})
    with pytest.raises(UnknownReference, match="retired"):
        await inference.submit(bad)
    assert len(services.requests.list()) == 1
    await inference.stop()


async def test_a_run_is_timed_on_the_clock_the_service_was_given(db) -> None:
    _, services, tenant = db
    clock, runtime = ManualClock(), FakeRuntime()
    inference = await _service(db, runtime, clock=clock)
    accepted = clock.utcnow()
    started = await inference.submit(call(tenant))
    rid = started.request.id
    clock.advance(0.2)
    usage = runtime.step_done(rid, "embed", 5)  # 1.5 ms on the device: 2 ms in the ledger
    clock.advance(0.3)
    runtime.handles[rid].resolve(RunResult(rid, "succeeded", {"vec": [0.5] * 3}, None, "ok",
                                           (usage,)))  # fmt: skip
    record = await inference.wait(rid, 5)
    assert started.request.received_at == accepted
    assert record.finished_at == accepted + timedelta(seconds=0.5)
    # the step ended 200 ms after the run was accepted, having run 2 ms (rounded up)
    assert record.started_at == accepted + timedelta(milliseconds=198)
    assert record.result["nodes"]["embed"]["done_ms"] == 200
    (bill,) = services.usage.list(request_id=rid)
    assert bill.recorded_at == accepted + timedelta(seconds=0.2)
    await inference.stop()
