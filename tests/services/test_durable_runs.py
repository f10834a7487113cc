"""A run an earlier process left open fails with a retryable reason, and a repeat of its
idempotency key (same body) runs the request again instead of replaying that failure; any
other failed run is still replayed, and a different body still conflicts."""

from __future__ import annotations

import asyncio

import pytest

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


async def test_a_run_failed_by_a_restart_is_rerun_under_its_key(db) -> None:  # noqa: F811
    _, services, tenant = db
    first = await _service(db, FakeRuntime())
    rid = (await first.submit(call(tenant, "k1"))).request.id
    _crash(first)
    runtime = FakeRuntime()
    restarted = await _service(db, runtime)
    failed = services.requests.get(rid)
    assert failed.status == "failed" and failed.error == RESTART_FAILURE
    assert failed.error.startswith("retryable:")
    with pytest.raises(IdempotencyConflict):  # another body under the key is still refused
        await restarted.submit(call(tenant, "k1", body="other"))
    retry = await restarted.submit(call(tenant, "k1"))
    assert not retry.existing and retry.request.id != rid
    assert retry.request.idempotency_key == "k1~retry1"
    assert list(runtime.handles) == [retry.request.id]  # it runs again
    runtime.step_done(retry.request.id, "embed", 3)
    runtime.handles[retry.request.id].resolve(
        RunResult(retry.request.id, "succeeded", {"vec": [1.0]}, None, None)
    )
    await _until_status(restarted, services, retry.request.id, "succeeded")
    again = await restarted.submit(call(tenant, "k1"))  # the key now answers with the success
    assert again.existing and again.request.id == retry.request.id
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
