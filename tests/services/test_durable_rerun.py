"""A run failed by a restart (it could not be resumed) keeps its completed steps' outputs: a
repeat of its idempotency key reruns it past them (handed to the runtime as done, so they are
neither run nor billed again), through further restarts; they go with the rerun's end, and a
repeat after ``KEPT_STEPS_MAX_AGE_S`` runs every step again (still billed once). On SQLite and
PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from control.runtime.types import KeptOutput, RunResult
from control.services.inference_recovery import KEPT_STEPS_MAX_AGE_S
from control.services.run_records import RESTART_FAILURE
from tests.services.test_durable_runs import RecordingRuntime, _crash, _until_status
from tests.services.test_durable_runs_steps import _steps_left, _usage
from tests.services.test_durable_runs_steps import db as db  # noqa: F401  (the fixture)
from tests.services.test_inference_durability import _service, call

KEPT = KeptOutput("embed", None, None, None, {"vector": [0.5, 0.25]})


async def _failed_by_a_restart(db, key: str):  # noqa: ANN001, ANN202, F811
    """A run whose step ``embed`` was billed and kept, then failed (not resumed) by a restart;
    returns (restarted service, its runtime, request id)."""
    factory, services, tenant = db
    first = await _service(db, RecordingRuntime())
    rid = (await first.submit(call(tenant, key))).request.id
    first.runtime.usage_sink(replace(_usage(rid, "embed", 7), kept=KEPT))
    await first.writer.flush()
    _crash(first)
    runtime = RecordingRuntime()
    restarted = await _service(db, runtime, resume_max_age_s=0)  # too old to resume: failed
    assert services.requests.get(rid).error == RESTART_FAILURE
    return restarted, runtime, rid


def _ledger(services, rid: str) -> list:  # noqa: ANN001
    return [(e.node_id, e.attempt, e.input_tokens) for e in services.usage.list(request_id=rid)]


async def test_a_retry_after_a_restart_failure_gets_the_completed_steps_as_done(db) -> None:  # noqa: F811
    factory, services, tenant = db
    restarted, runtime, rid = await _failed_by_a_restart(db, "k1")
    assert _steps_left(factory) == 1  # kept with the retryable failure
    retry = await restarted.submit(call(tenant, "k1"))
    assert retry.request.id == rid and not retry.existing
    (run,) = runtime.runs
    assert run.completed == (KEPT,)  # not run again, so not billed again
    runtime.handles[rid].resolve(RunResult(rid, "succeeded", {"vec": [0.5]}, None, None))
    await _until_status(restarted, services, rid, "succeeded")
    assert _ledger(services, rid) == [("embed", "1", 7)]  # as a run never interrupted
    assert _steps_left(factory) == 0  # gone with the rerun's end
    again = await restarted.submit(call(tenant, "k1"))  # the key answers with the success
    assert again.existing and len(runtime.runs) == 1
    await restarted.stop()


async def test_kept_steps_survive_another_restart_before_the_retry(db) -> None:  # noqa: F811
    factory, services, tenant = db
    restarted, _, rid = await _failed_by_a_restart(db, "k2")
    other = (await restarted.submit(call(tenant, "k3"))).request.id  # open at the next crash
    _crash(restarted)
    runtime = RecordingRuntime()
    third = await _service(db, runtime, resume_max_age_s=0)  # fails `other`, purges ended rows
    assert third.recovered == [other]
    assert _steps_left(factory) == 1  # the first run's kept step is still there
    await third.submit(call(tenant, "k2"))
    assert runtime.runs[0].completed == (KEPT,)
    await third.stop()


async def test_expired_kept_steps_are_run_again_and_billed_once(db) -> None:  # noqa: F811
    factory, services, tenant = db
    restarted, runtime, rid = await _failed_by_a_restart(db, "k4")
    long_ago = datetime.now(UTC) - timedelta(seconds=KEPT_STEPS_MAX_AGE_S + 60)
    with factory.begin() as session:
        session.execute(text("UPDATE requests SET finished_at = :t WHERE id = :rid"),
                        {"t": long_ago, "rid": rid})  # fmt: skip
    await restarted.submit(call(tenant, "k4"))
    assert runtime.runs[0].completed == ()  # expired: every step runs again
    assert _steps_left(factory) == 0
    runtime.usage_sink(replace(_usage(rid, "embed", 7), kept=KEPT))  # the rerun's own bill
    runtime.handles[rid].resolve(RunResult(rid, "succeeded", {"vec": [0.5]}, None, None))
    await _until_status(restarted, services, rid, "succeeded")
    assert _ledger(services, rid) == [("embed", "1", 7)]  # the ledger keeps one entry
    await restarted.stop()
