"""The SQLite file's path of the run log (raw sqlite3, inline commits): the same stored bytes
and outcomes as the Core path (the plain path, ``raw_sqlite`` off), the Core path's error types
whenever a batch is unusual, and durable commits."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import uuid
from datetime import timedelta

import pytest
from sqlalchemy.exc import IntegrityError

from control.services.errors import IdempotencyConflict
from control.services.run_records import AcceptRequest, BillStep, FinishRequest, Submission
from control.store.runlog import GroupCommitWriter, WriterConfig, backend_for
from control.store.runlog.backends import CoreBackend
from control.store.runlog.sqlite_file import SqliteFileBackend
from db.session import make_engine, make_session_factory
from tests.services.builders import T0, build_world


@pytest.fixture
def sqlite_world(tmp_path, _sqlite_template):
    """(url of a migrated SQLite file with a world, the world)."""

    def make(name: str):
        path = tmp_path / name
        shutil.copyfile(_sqlite_template, path)
        url = f"sqlite:///{path}"
        return url, build_world(make_session_factory(make_engine(url)))

    return make


def _ops(tenant: int, ids: list[str]) -> list[list]:
    """Batches covering every shape: an unkeyed run in one commit (accept, bills, end folded
    into the insert), a keyed accept ended later, a repeated bill, ends with and without
    result, started and first-token times, an error text and a non-ASCII output."""
    a, b, c = ids
    t1, t2 = T0 + timedelta(milliseconds=1500), T0 + timedelta(seconds=3, microseconds=7)

    def accept(rid, key=None):
        return AcceptRequest.new(request_id=rid, tenant_id=tenant, workflow_name="model.m",
                                 workflow_version="1", body_hash="h" * 64,
                                 priority_class="standard", received_at=T0,
                                 idempotency_key=key)  # fmt: skip

    def bill(rid, node="embed", attempt="1", tokens=5):
        return BillStep(request_id=rid, node_id=node, attempt=attempt, input_tokens=tokens,
                        output_tokens=2, device_ms=3, cost_units=tokens + 2, recorded_at=t1)  # fmt: skip

    return [
        [
            accept(a),
            bill(a),
            bill(a, tokens=9),
            FinishRequest(a, "succeeded", t2, {"outputs": {"embedding": [0.5, -1.25]}}, None, t1),
        ],
        [accept(b, "key-b"), accept(c)],
        [
            bill(b),
            bill(b, "llm", "2"),
            bill(c),
            FinishRequest(b, "failed", t2, {"usage": {"é": 1}}, "boom ✗", t1, t2),
            FinishRequest(c, "cancelled", t2),
        ],
        [FinishRequest(b, "succeeded", t2, {"late": True})],  # the first end stays
    ]


def _dump(url: str) -> dict[str, list[tuple]]:
    """Every stored cell of the two tables, as sqlite holds it (ledger ids aside)."""
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        requests = conn.execute("SELECT * FROM requests ORDER BY id").fetchall()
        usage = conn.execute("SELECT request_id, node_id, attempt, model_id, device_id, "
                             "input_tokens, output_tokens, device_ms, cost_units, recorded_at "
                             "FROM usage_entries ORDER BY request_id, node_id, attempt").fetchall()  # fmt: skip
    finally:
        conn.close()
    return {"requests": requests, "usage": usage}


async def test_raw_path_stores_the_bytes_of_the_core_path(sqlite_world) -> None:
    (slow_url, world), (fast_url, _) = sqlite_world("slow.db"), sqlite_world("fast.db")
    ids = [str(uuid.uuid4()) for _ in range(3)]
    slow_outcomes, fast_outcomes = [], []
    slow = backend_for(make_session_factory(make_engine(slow_url)), WriterConfig(raw_sqlite=False))
    assert isinstance(slow, CoreBackend)
    for batch in _ops(world.tenant, ids):
        slow_outcomes.append(slow.transaction(batch))
    writer = GroupCommitWriter(make_session_factory(make_engine(fast_url)))
    writer.start()
    for batch in _ops(world.tenant, ids):
        fast_outcomes.append([await writer.write(op) for op in batch])
    await writer.stop()
    assert writer.inline_commits == writer.commits  # every batch took the raw path
    assert fast_outcomes == slow_outcomes
    assert fast_outcomes[0][1:3] == [True, False]  # the repeated bill is not billed
    stored = _dump(fast_url)
    assert stored == _dump(slow_url)
    assert len(stored["requests"]) == 3 and len(stored["usage"]) == 4


async def test_unusual_batches_get_the_core_paths_outcomes_and_errors(sqlite_world) -> None:
    url, world = sqlite_world("w.db")
    writer = GroupCommitWriter(make_session_factory(make_engine(url)))
    writer.start()

    def accept(key, body="h1", tenant=world.tenant):
        return AcceptRequest.new(request_id=str(uuid.uuid4()), tenant_id=tenant,
                                 workflow_name="rag", workflow_version="1", body_hash=body,
                                 priority_class="standard", received_at=T0,
                                 idempotency_key=key)  # fmt: skip

    first = accept("k1")
    assert await writer.write(first) == Submission(first.record, existing=False)
    again = await writer.write(accept("k1"))
    with pytest.raises(IdempotencyConflict) as conflict:
        await writer.write(accept("k1", "h2"))
    orphan = writer.submit(accept("k9", tenant=world.tenant + 999))  # no such tenant
    fine = writer.submit(accept("k2"))
    with pytest.raises(IntegrityError):  # the Core path's error type, for its caller only
        await orphan
    assert (await fine).existing is False
    await writer.stop()
    assert again.existing and again.request.id == first.record.id
    assert conflict.value.request_id == first.record.id


async def test_raw_commits_are_durable_and_the_connection_is_returned(sqlite_world) -> None:
    url, world = sqlite_world("d.db")
    engine = make_engine(url)
    writer = GroupCommitWriter(make_session_factory(engine))
    writer.start()
    rid = str(uuid.uuid4())
    op = AcceptRequest.new(request_id=rid, tenant_id=world.tenant, workflow_name="rag",
                           workflow_version="1", body_hash="h", priority_class="standard",
                           received_at=T0)  # fmt: skip
    await writer.write(op)
    assert writer.inline_commits == 1  # one small batch, an idle writer: committed on the loop
    assert engine.pool.checkedout() == 1  # the loop's connection is kept for the next one
    await writer.stop()
    assert engine.pool.checkedout() == 0
    assert [r[0] for r in _dump(url)["requests"]] == [rid]  # a fresh connection sees it
    with engine.connect() as conn:  # the pool got the connection back with its own settings
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000


def _accept(tenant: int) -> AcceptRequest:
    return AcceptRequest.new(request_id=str(uuid.uuid4()), tenant_id=tenant,
                             workflow_name="rag", workflow_version="1", body_hash="h",
                             priority_class="standard", received_at=T0)  # fmt: skip


async def test_without_inline_commits_every_batch_goes_to_the_database_thread(sqlite_world) -> None:
    url, world = sqlite_world("t.db")
    writer = GroupCommitWriter(
        make_session_factory(make_engine(url)), WriterConfig(inline_max_rows=0)
    )
    writer.start()
    op = _accept(world.tenant)
    assert (await writer.write(op)).existing is False
    await writer.stop()
    assert writer.inline_commits == 0 and writer.commits == 1
    assert [r[0] for r in _dump(url)["requests"]] == [op.record.id]


async def test_a_held_write_lock_sends_the_batch_to_the_thread_without_stalling_the_loop(
    sqlite_world,
) -> None:
    url, world = sqlite_world("l.db")
    writer = GroupCommitWriter(make_session_factory(make_engine(url)))
    writer.start()
    other = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock for a while
    loop = asyncio.get_running_loop()
    loop.call_later(0.3, other.execute, "COMMIT")
    op = _accept(world.tenant)
    pending = writer.submit(op)
    started = loop.time()
    await asyncio.sleep(0.05)  # the loop is free while the database thread waits for the lock
    assert loop.time() - started < 0.25
    assert (await pending).existing is False
    await writer.stop()
    other.close()
    assert writer.inline_commits == 0 and writer.commits == 1
    assert [r[0] for r in _dump(url)["requests"]] == [op.record.id]


def test_only_a_sqlite_file_gets_the_raw_path(tmp_path) -> None:
    def backend(url: str, config: WriterConfig = WriterConfig()):
        return type(backend_for(make_session_factory(make_engine(url)), config))

    file = f"sqlite:///{tmp_path / 'f.db'}"
    assert backend("postgresql://u@localhost/x") is CoreBackend
    assert backend("sqlite://") is CoreBackend  # in memory: no second connection to inline on
    assert backend(file, WriterConfig(raw_sqlite=False)) is CoreBackend
    assert backend(file) is SqliteFileBackend


def _wal_frames(url: str) -> int:
    """Frames in the WAL now (a passive checkpoint reports them and changes nothing else)."""
    conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        return conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    finally:
        conn.close()


@pytest.mark.parametrize("every", [4, 10_000])
async def test_inline_commits_have_the_wal_checkpointed_and_reset(sqlite_world, every) -> None:
    """The loop's connection never checkpoints; every ``checkpoint_every`` inline commits the
    database thread does, and the next commit starts the WAL over instead of growing it."""
    url, world = sqlite_world(f"w{every}.db")
    writer = GroupCommitWriter(
        make_session_factory(make_engine(url)), WriterConfig(checkpoint_every=every)
    )
    writer.start()
    for _ in range(12):
        await writer.write(_accept(world.tenant))
        await writer.run_in_db_thread(lambda: None)  # a checkpoint queued meanwhile has run
    frames = _wal_frames(url)
    await writer.stop()
    assert writer.inline_commits == 12 and len(_dump(url)["requests"]) == 12
    if every == 4:  # reset by the 5th and 9th commits: only the last four commits are there
        assert writer.checkpoints == 3 and frames < 12 * 4 / 2
    else:
        assert writer.checkpoints == 0 and frames >= 12 * 4  # every commit's pages (4 at least)
