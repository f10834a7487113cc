"""Request lifecycle rows and ledger entries through the group-commit writer, on SQLite and
PostgreSQL: the database enforces idempotency keys and the ledger's one-entry-per-step rule, a
bad operation fails alone, and an acknowledged write is committed."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from sqlalchemy.exc import IntegrityError

from control.services.errors import IdempotencyConflict, ValidationError
from control.services.run_records import AcceptRequest, BillStep, FinishRequest, Submission
from control.store import repositories as repo
from control.store.runlog import GroupCommitWriter, WriterConfig, backend_for
from db.session import make_engine, make_session_factory, session_scope
from tests.services.builders import T0, row_counts


def accept(tenant: int, key: str | None, body: str = "h1", rid: str | None = None) -> AcceptRequest:
    return AcceptRequest.new(
        request_id=rid or str(uuid.uuid4()), tenant_id=tenant, workflow_name="rag",
        workflow_version="1", body_hash=body, priority_class="standard", received_at=T0,
        idempotency_key=key,
    )  # fmt: skip


def bill(rid: str, node: str = "embed", attempt: str = "1", tokens: int = 5) -> BillStep:
    return BillStep(request_id=rid, node_id=node, attempt=attempt, input_tokens=tokens,
                    output_tokens=0, device_ms=2, cost_units=tokens, recorded_at=T0)  # fmt: skip


def apply(factory, ops):
    """``ops`` in one transaction of the database kind's own path (raw sqlite3 on a SQLite
    file, Core on PostgreSQL)."""
    backend = backend_for(factory, WriterConfig())
    try:
        return backend.transaction(ops)
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("second_key", "second_body", "expect"),
    [
        ("k1", "h1", "existing"),  # a retry with the same body: the first request
        ("k1", "h2", "conflict"),  # the same key with another body
        ("k2", "h2", "new"),  # another key
        (None, "h1", "new"),  # no key: never a duplicate
    ],
)
def test_accept_lets_the_database_decide_idempotency(
    session_factory, world, second_key, second_body, expect
) -> None:
    first = accept(world.tenant, "k1")
    [sub] = apply(session_factory, [first])
    assert sub == Submission(first.record, existing=False)
    [out] = apply(session_factory, [accept(world.tenant, second_key, second_body)])
    if expect == "conflict":
        assert isinstance(out, IdempotencyConflict) and out.request_id == first.record.id
    elif expect == "existing":
        assert out.existing and out.request.id == first.record.id
    else:
        assert not out.existing and out.request.id != first.record.id
    rows = row_counts(session_factory)
    assert rows["requests"] == (1 if expect in ("existing", "conflict") else 2)
    assert rows["audit_records"] == 0  # data, not operator mutations


def test_duplicates_inside_one_batch_insert_one_row(session_factory, world) -> None:
    ops = [accept(world.tenant, "same") for _ in range(5)] + [accept(world.tenant, None)]
    outs = apply(session_factory, ops)
    assert [o.existing for o in outs] == [False, True, True, True, True, False]
    assert {o.request.id for o in outs[:5]} == {ops[0].record.id}
    assert row_counts(session_factory)["requests"] == 2


def test_each_step_is_billed_once_and_the_first_end_wins(session_factory, world) -> None:
    rid = accept(world.tenant, None).record.id
    first = apply(session_factory, [accept(world.tenant, None, rid=rid), bill(rid, tokens=5),
                                    bill(rid, tokens=9)])  # fmt: skip
    assert first[1:] == [True, False]  # the repeat in the same batch is not billed
    again = apply(session_factory, [bill(rid, tokens=7), bill(rid, "llm", tokens=3),
                                    bill(rid, attempt="2", tokens=4)])  # fmt: skip
    assert again == [False, True, True]
    other = apply(session_factory, [accept(world.tenant, None)])[0].request.id
    end = FinishRequest(rid, "failed", T0 + timedelta(seconds=3), {"usage": {}}, "boom")
    late = FinishRequest(rid, "succeeded", T0 + timedelta(seconds=4), {"outputs": {}})
    done = FinishRequest(other, "succeeded", T0 + timedelta(seconds=4), {"outputs": {"a": 1}})
    apply(session_factory, [end, done])  # several finishes: one executemany
    apply(session_factory, [late])
    with session_scope(session_factory) as session:
        stored = repo.RequestRepository(session).get(rid)
        totals = repo.UsageRepository(session).totals(request_id=rid)
        second = repo.RequestRepository(session).get(other)
    assert (stored.status, stored.error) == ("failed", "boom")
    assert (second.status, second.result) == ("succeeded", {"outputs": {"a": 1}})
    assert totals["input_tokens"] == 5 + 3 + 4


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda t: accept(t, "x" * 201), "idempotency_key"),
        (lambda t: accept(0, None), "tenant_id"),
        (lambda t: bill("r", tokens=-1), "input_tokens"),
        (lambda t: FinishRequest("r", "running", T0), "status"),
    ],
)
def test_bad_values_are_refused_before_any_write(world, build, field) -> None:
    with pytest.raises(ValidationError) as caught:
        build(world.tenant)
    assert caught.value.field == field


async def test_writer_groups_commits_and_fails_only_the_bad_operation(session_factory, world):
    writer = GroupCommitWriter(session_factory, WriterConfig(max_rows=64))
    writer.start()
    good = [accept(world.tenant, f"k{i}") for i in range(40)]
    bad = accept(world.tenant + 999, "orphan")  # no such tenant: a foreign-key violation
    futures = [writer.submit(op) for op in [*good[:20], bad, *good[20:]]]
    outcomes = await asyncio.gather(*futures, return_exceptions=True)
    await writer.stop()
    assert isinstance(outcomes[20], IntegrityError)
    assert all(isinstance(o, Submission) and not o.existing for i, o in enumerate(outcomes)
               if i != 20)  # fmt: skip
    assert row_counts(session_factory)["requests"] == 40
    assert writer.rows == 41 and writer.commits < 41  # rows shared commits


async def test_an_acknowledged_write_survives_a_restart(tmp_path, _sqlite_template, world_url):
    url, tenant = world_url
    factory = make_session_factory(make_engine(url))
    writer = GroupCommitWriter(factory)
    writer.start()
    sub = await writer.write(accept(tenant, "durable"))
    rid = sub.request.id
    assert await writer.write(bill(rid)) is True
    await writer.stop()
    fresh = make_session_factory(make_engine(url))  # a new process's view of the file
    with session_scope(fresh) as session:
        assert repo.RequestRepository(session).get(rid).status == "queued"
        assert len(repo.UsageRepository(session).list(request_id=rid)) == 1


async def test_commit_now_commits_in_this_iteration_and_then_is_told_as_it_resolves(world_url):
    url, tenant = world_url  # a SQLite file: small batches commit inline, on the loop
    writer = GroupCommitWriter(make_session_factory(make_engine(url)))
    writer.start()
    told: list = []
    first = writer.submit(accept(tenant, "now-1"), told.append)
    second = writer.submit(accept(tenant, "now-2"))
    writer.commit_now()  # e.g. the driver's turn ended: no loop iteration in between
    assert told == [first] and first.result().request.idempotency_key == "now-1"
    assert second.done() and writer.commits == 1  # the two share the commit
    writer.commit_now()  # nothing scheduled: nothing happens
    bad = writer.submit(accept(tenant + 999, "orphan"), told.append)  # its error is told too
    await asyncio.sleep(0.1)
    assert told[-1] is bad and isinstance(bad.exception(), IntegrityError)
    await writer.stop()
    late = writer.submit(bill("r"), told.append)  # refused after stop: still told
    await asyncio.sleep(0)
    assert told[-1] is late and isinstance(late.exception(), RuntimeError)


async def test_submit_before_start_is_misuse(session_factory) -> None:
    writer = GroupCommitWriter(session_factory)
    with pytest.raises(RuntimeError, match="not running"):
        writer.submit(bill("r"))
    with pytest.raises(ValueError, match="max_rows"):
        WriterConfig(max_rows=0)


@pytest.fixture
def world_url(tmp_path, _sqlite_template):
    import shutil

    from tests.services.builders import build_world

    path = tmp_path / "durable.db"
    shutil.copyfile(_sqlite_template, path)
    url = f"sqlite:///{path}"
    return url, build_world(make_session_factory(make_engine(url))).tenant


def test_ended_is_the_record_replaced_by_its_end_field_for_field() -> None:
    from dataclasses import fields, replace

    from control.services.inference_settle import ended
    from control.store import records as rec

    later = T0 + timedelta(seconds=1)
    record = rec.RequestRecord(**{f.name: f"v-{f.name}" for f in fields(rec.RequestRecord)})
    notes = [{"node": "e", "wanted": "m:1", "ran": "m:1@int8", "kind": "degrade", "reason": "x"}]
    finish = FinishRequest("r", "succeeded", later, {"out": 1}, "none", T0, later,
                           degradations=notes)  # fmt: skip
    assert ended(record, finish) == replace(
        record, status="succeeded", result={"out": 1}, error="none", finished_at=later,
        started_at=T0, degradations=notes,
    )  # fmt: skip
