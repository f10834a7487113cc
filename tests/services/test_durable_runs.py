"""Runs an earlier process left open: resumed under their own request id and idempotency key
(the ledger keeps one entry per step across the restart, the run ends succeeded), or, where
they cannot be (no recorded inputs, too old), failed with a retryable reason that a repeat of
the key (same body) overrides by running the request again; any other failed run is still
replayed, and a different body still conflicts."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select, text

from control.runtime.types import RunResult
from control.services.errors import IdempotencyConflict
from control.services.run_records import RESTART_FAILURE
from tests.services.test_inference_durability import FakeRuntime, _service, call
from tests.services.test_inference_durability import db as db  # noqa: F401  (the fixture)


async def _until_status(inference, services, rid: str, status: str) -> None:  # noqa: ANN001
    """Wait (bounded) until the run's end is committed."""
    for _ in range(200):
        await inference.writer.flush()
        if services.requests.get(rid).status == status:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{rid} never became {status}")


def _crash(inference) -> None:  # noqa: ANN001
    """The process dies without settling its runs: the writer takes and commits nothing more."""
    inference.writer._stopping = True


class RecordingRuntime(FakeRuntime):
    """Also keeps each submitted run (its core request, payload and sampling)."""

    def __init__(self) -> None:
        super().__init__()
        self.runs = []

    def submit_run(self, run):  # noqa: ANN001, ANN201
        self.runs.append(run)
        return super().submit_run(run)


def _inputs_left(factory) -> int:  # noqa: ANN001
    with factory() as session:
        return session.execute(select(func.count()).select_from(text("run_inputs"))).scalar_one()


async def test_an_open_run_is_resumed_and_its_billed_steps_are_not_billed_again(db) -> None:  # noqa: F811
    factory, services, tenant = db
    first = await _service(db, FakeRuntime())
    rid = (await first.submit(call(tenant, "k1"))).request.id
    first.runtime.step_done(rid, "embed", 7)
    await first.writer.flush()
    assert _inputs_left(factory) == 1  # recorded in the accept's commit
    _crash(first)
    runtime = RecordingRuntime()
    restarted = await _service(db, runtime)
    assert restarted.resumed == [rid] and restarted.recovered == []
    assert services.requests.get(rid).status == "queued"  # visible again as queued
    (run,) = runtime.runs  # handed to the runtime again, as first submitted
    assert run.request.request_id == rid and run.request.idempotency_key == "k1"
    assert run.request.tenant_id == "acme" and run.payload == {"text": "x"}
    runtime.step_done(rid, "embed", 7)  # the same step, reported again after the restart
    runtime.handles[rid].resolve(RunResult(rid, "succeeded", {"vec": [1.0]}, None, None))
    await _until_status(restarted, services, rid, "succeeded")
    assert [e.input_tokens for e in services.usage.list(request_id=rid)] == [7]  # billed once
    assert _inputs_left(factory) == 0  # an ended run's inputs are deleted with its end
    await restarted.stop()


async def test_an_open_run_without_recorded_inputs_fails_retryably(db) -> None:  # noqa: F811
    factory, services, tenant = db
    first = await _service(db, FakeRuntime())
    rid = (await first.submit(call(tenant, "k3"))).request.id
    _crash(first)
    with factory.begin() as session:  # as if accepted before inputs were recorded
        session.execute(text("DELETE FROM run_inputs"))
    restarted = await _service(db, FakeRuntime())
    assert restarted.recovered == [rid] and restarted.resumed == []
    assert services.requests.get(rid).error == RESTART_FAILURE
    await restarted.stop()


async def test_a_run_failed_by_a_restart_is_rerun_under_its_key(db) -> None:  # noqa: F811
    _, services, tenant = db
    first = await _service(db, FakeRuntime())
    rid = (await first.submit(call(tenant, "k1"))).request.id
    first.runtime.step_done(rid, "embed", 7)  # billed before the crash
    await first.writer.flush()
    _crash(first)
    runtime = FakeRuntime()
    restarted = await _service(db, runtime, resume_max_age_s=0)  # too old to resume
    failed = services.requests.get(rid)
    assert failed.status == "failed" and failed.error == RESTART_FAILURE
    assert failed.error.startswith("retryable:")
    with pytest.raises(IdempotencyConflict):  # another body under the key is still refused
        await restarted.submit(call(tenant, "k1", body="other"))
    retry = await restarted.submit(call(tenant, "k1"))
    assert not retry.existing and retry.request.id == rid  # reopened under its own id
    assert retry.request.status == "queued" and retry.request.idempotency_key == "k1"
    assert list(runtime.handles) == [rid]  # it runs again
    runtime.step_done(rid, "embed", 3)  # billed before the restart: dropped by the ledger
    runtime.handles[rid].resolve(RunResult(rid, "succeeded", {"vec": [1.0]}, None, None))
    await _until_status(restarted, services, rid, "succeeded")
    assert [e.input_tokens for e in services.usage.list(request_id=rid)] == [7]  # billed once
    again = await restarted.submit(call(tenant, "k1"))  # the key now answers with the success
    assert again.existing and again.request.id == rid
    await restarted.stop()


async def test_a_run_that_failed_by_itself_is_replayed(db) -> None:  # noqa: F811
    _, services, tenant = db
    runtime = FakeRuntime()
    inference = await _service(db, runtime)
    rid = (await inference.submit(call(tenant, "k2"))).request.id
    runtime.handles[rid].resolve(RunResult(rid, "failed", {}, "model error", "model error"))
    await _until_status(inference, services, rid, "failed")
    replay = await inference.submit(call(tenant, "k2"))
    assert replay.existing and replay.request.id == rid
    assert list(runtime.handles) == [rid]  # not run again
    await inference.stop()
