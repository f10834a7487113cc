"""A restart in the middle of multi-step runs (embed -> search -> rerank -> gen on a real live
runtime): step ``rerank`` is held back on its device (never run) while ``embed`` and
``search`` complete and are committed with their bills, then the process "dies" and a new one
starts on the same database. One run is resumed; the other cannot be (its recorded inputs are
gone) and is failed by the restart, then rerun under its Idempotency-Key. Both succeed without
running ``embed`` again, and the ledger of each is that of a run never interrupted: each step
billed once."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sqlalchemy import text

from control.services.run_records import RESTART_FAILURE
from tests.faults import resume_world as w

HOLD = frozenset({"rerank"})
NODES = ["embed", "gen", "rerank", "search"]


def _kept(factory) -> list[tuple[str, str]]:  # noqa: ANN001
    with factory() as session:
        rows = session.execute(text("SELECT request_id, node_id FROM run_steps"))
        return sorted((r, n) for r, n in rows)


async def _interrupted(db, model_cache: Path) -> list[str]:  # noqa: ANN001
    """Submit two runs, let their first steps complete while ``rerank`` is held, then crash."""
    factory, _, tenant = db
    first = await w.service(db, w.executor(model_cache, HOLD))
    ex = first.runtime.executor
    try:
        rids = [(await first.submit(w.call(tenant, key))).request.id for key in ("k1", "k2")]
        want = sorted((rid, node) for rid in rids for node in ("embed", "search"))
        for _ in range(600):  # bounded: until both runs' first steps are committed
            await asyncio.wait_for(ex.held.wait(), 60)
            await first.writer.flush()
            if _kept(factory) == want:
                break
            await asyncio.sleep(0.05)
        assert _kept(factory) == want  # committed with their bills before the crash
        assert ex.steps["embed"] == 2 and ex.steps["rerank"] == 0
    finally:
        await w.crash(first)
    return rids


async def test_restarted_runs_do_not_run_their_completed_steps_again(
    tmp_path, model_cache, _sqlite_template
) -> None:  # noqa: ANN001, E501
    db = w.database(tmp_path, _sqlite_template)
    factory, services, tenant = db
    resumed, failed = await _interrupted(db, model_cache)
    with factory.begin() as session:  # the second cannot be resumed: failed by the restart
        session.execute(text("DELETE FROM run_inputs WHERE request_id = :r"), {"r": failed})
    restarted = await w.service(db, w.executor(model_cache))
    ex = restarted.runtime.executor
    try:
        assert restarted.resumed == [resumed] and restarted.recovered == [failed]
        assert services.requests.get(failed).error == RESTART_FAILURE
        assert (await w.until_ended(restarted, resumed)).status == "succeeded"
        retry = await restarted.submit(w.call(tenant, "k2"))
        assert retry.request.id == failed and not retry.existing  # reopened under its own id
        assert (await w.until_ended(restarted, failed)).status == "succeeded"
        assert ex.steps["embed"] == 0 and ex.steps["rerank"] == 2  # only the unfinished ran
        plain = (await restarted.submit(w.call(tenant, "plain"))).request.id
        assert (await w.until_ended(restarted, plain)).status == "succeeded"
        never_interrupted = w.ledger(services, plain)
        assert [node for node, *_ in never_interrupted] == NODES
        assert w.ledger(services, resumed) == never_interrupted
        assert w.ledger(services, failed) == never_interrupted
        assert _kept(factory) == []  # gone with the runs' ends
    finally:
        await restarted.stop()
