"""A resumable (async) run's completed steps are kept with their bills (``run_steps``, the same
commit) and handed to the resumed run as done after a restart, so they are neither run nor
billed again; the rows go with the run's end. On SQLite and PostgreSQL."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import func, select, text

from control.runtime.types import KeptOutput, RunResult, UsageRecord
from control.services import build_services
from db.session import make_engine, make_session_factory
from tests.services.test_durable_runs import RecordingRuntime, _crash, _until_status
from tests.services.test_inference_durability import SPEC, _service, call


@pytest.fixture
def db(db_url):  # noqa: ANN001, ANN201
    factory = make_session_factory(make_engine(db_url))
    services = build_services(factory)
    tenant = services.tenants.create("t", name="acme", weight=1, priority_class="critical")
    services.workflows.create("t", name="pipe", version="1", spec=SPEC, status="active")
    return factory, services, tenant.id


def _steps_left(factory) -> int:  # noqa: ANN001
    with factory() as session:
        return session.execute(select(func.count()).select_from(text("run_steps"))).scalar_one()


async def test_a_resumed_run_gets_its_completed_steps_as_done(db) -> None:
    factory, services, tenant = db
    first = await _service(db, RecordingRuntime())
    rid = (await first.submit(call(tenant, "k1"))).request.id
    assert first.runtime.runs[0].durable  # an async run keeps its steps' outputs
    kept = KeptOutput("embed", None, None, None, {"vector": [0.5, 0.25]})
    first.runtime.usage_sink(replace(_usage(rid, "embed", 7), kept=kept))
    await first.writer.flush()
    assert _steps_left(factory) == 1  # with the step's bill
    _crash(first)
    runtime = RecordingRuntime()
    restarted = await _service(db, runtime)
    assert restarted.resumed == [rid]
    (run,) = runtime.runs
    assert run.completed == (kept,)  # handed over done: the runtime does not run it again
    runtime.handles[rid].resolve(RunResult(rid, "succeeded", {"vec": [0.5]}, None, None))
    await _until_status(restarted, services, rid, "succeeded")
    assert [e.input_tokens for e in services.usage.list(request_id=rid)] == [7]
    assert _steps_left(factory) == 0  # deleted with the run's end
    await restarted.stop()


async def test_a_sync_run_keeps_no_step_outputs(db) -> None:
    factory, _, tenant = db
    inference = await _service(db, RecordingRuntime())
    await inference.submit(replace(call(tenant, "k2"), announce_at_end=True))
    assert not inference.runtime.runs[0].durable
    await inference.stop()


def _usage(rid: str, node: str, tokens: int) -> UsageRecord:
    return UsageRecord(rid, "acme", "pipe:1", node, f"{rid}/{node}", 1, "m:1", "cpu:0",
                       None, tokens, 0, 1500, tokens * 2, 1)  # fmt: skip


async def test_a_retry_of_a_run_failed_by_a_restart_bills_nothing_twice(db) -> None:
    from tests.services.test_inference_durability import FakeRuntime

    factory, services, tenant = db
    first = await _service(db, FakeRuntime())
    rid = (await first.submit(call(tenant, "k3"))).request.id
    first.runtime.step_done(rid, "embed", 7)
    await first.writer.flush()
    _crash(first)
    runtime = FakeRuntime()
    restarted = await _service(db, runtime, resume_max_age_s=0)  # failed, retryably
    ledger = [(e.node_id, e.attempt, e.input_tokens) for e in services.usage.list(request_id=rid)]
    retry = await restarted.submit(call(tenant, "k3"))
    assert retry.request.id == rid and not retry.existing  # reopened, not a new request
    runtime.step_done(rid, "embed", 7)  # run again: the ledger keeps its first entry only
    runtime.handles[rid].resolve(RunResult(rid, "succeeded", {"vec": [0.5]}, None, None))
    await _until_status(restarted, services, rid, "succeeded")
    after = [(e.node_id, e.attempt, e.input_tokens) for e in services.usage.list(request_id=rid)]
    assert after == ledger == [("embed", "1", 7)]
    await restarted.stop()
