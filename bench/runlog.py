"""Run-log writer benchmark: what each of the writer's fast paths buys, without the gateway.

A SQLite file with one tenant; each run is what a synchronous call writes (its accept, one
bill and its end, queued together: the row lingered to share the end's commit). Two phases
per configuration, the configurations interleaved for ``--rounds`` rounds (the machine may be
shared: compare within a round):

* ``single``: one caller, runs back to back: ``commit_us_p50`` (queued -> committed, the time
  a synchronous caller waits for its rows) and ``cpu_us_per_run`` (this process, all threads);
* ``multi``: ``--callers`` concurrent callers: ``runs_per_s``, ``cpu_us_per_run`` and
  ``rows_per_commit``.

Configurations: ``all`` (every fast path on), and one with each of ``raw_sqlite`` and
``inline_commits`` off (``commit_at_turn_end`` needs the driver's turn: see
``bench/gateway.py --without``). Prints JSON. Run: ``python bench/runlog.py [--runs 2000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control.clock import perf_counter, process_time, utcnow  # noqa: E402
from control.services import build_services  # noqa: E402
from control.services.loadgen import percentile  # noqa: E402
from control.services.run_records import AcceptRequest, BillStep, FinishRequest  # noqa: E402
from control.store.runlog import GroupCommitWriter, WriterConfig  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.session import make_engine, make_session_factory  # noqa: E402

CONFIGS = {"all": (), "without raw_sqlite": ("raw_sqlite",),
           "without inline_commits": ("inline_commits",)}  # fmt: skip


def _run_ops(tenant: int) -> list:
    now = utcnow()
    rid = str(uuid.uuid4())
    accept = AcceptRequest.new(request_id=rid, tenant_id=tenant, workflow_name="model.m",
                               workflow_version="1", body_hash="h" * 64,
                               priority_class="standard", received_at=now)  # fmt: skip
    bill = BillStep(request_id=rid, node_id="embed", attempt="1", input_tokens=5,
                    output_tokens=0, device_ms=1, cost_units=5, recorded_at=now)  # fmt: skip
    end = FinishRequest(rid, "succeeded", now, {"outputs": {"embedding": [0.25] * 32}}, None, now)
    return [accept, bill, end]


async def _single(writer: GroupCommitWriter, tenant: int, runs: int) -> dict:
    waits = []
    cpu = process_time()
    for _ in range(runs):
        t0 = perf_counter()
        futures = [writer.submit(op) for op in _run_ops(tenant)]
        await asyncio.gather(*futures)
        waits.append((perf_counter() - t0) * 1e6)
    cpu = process_time() - cpu
    return {"commit_us_p50": round(percentile(waits, 0.5) or 0),
            "commit_us_p99": round(percentile(waits, 0.99) or 0),
            "cpu_us_per_run": round(cpu / runs * 1e6)}  # fmt: skip


async def _multi(writer: GroupCommitWriter, tenant: int, runs: int, callers: int) -> dict:
    async def caller(n: int) -> None:
        for _ in range(n):
            await asyncio.gather(*(writer.submit(op) for op in _run_ops(tenant)))

    commits, rows = writer.commits, writer.rows
    cpu, wall = process_time(), perf_counter()
    await asyncio.gather(*(caller(runs // callers) for _ in range(callers)))
    cpu, wall = process_time() - cpu, perf_counter() - wall
    done = runs // callers * callers
    return {"runs_per_s": round(done / wall), "cpu_us_per_run": round(cpu / done * 1e6),
            "rows_per_commit": round((writer.rows - rows) / max(1, writer.commits - commits), 1)}  # fmt: skip


async def _measure(url: str, tenant: int, without: tuple, runs: int, callers: int) -> dict:
    writer = GroupCommitWriter(
        make_session_factory(make_engine(url)), WriterConfig().without(*without)
    )
    writer.start()
    await _single(writer, tenant, 50)  # warm-up: connections, statement caches
    single = await _single(writer, tenant, runs)
    multi = await _multi(writer, tenant, runs, callers)
    await writer.stop()
    return {"single": single, "multi": multi, "fast_paths": writer.config.fast_paths()}


def main(runs: int, callers: int, rounds: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix="legato-runlog-"))
    try:
        url = f"sqlite:///{root / 'legato.db'}"
        upgrade(url)
        tenant = build_services(make_session_factory(make_engine(url))).tenants.create(
            "bench", name="bench", weight=1).id  # fmt: skip
        out: dict[str, list] = {name: [] for name in CONFIGS}
        for _ in range(rounds):
            for name, without in CONFIGS.items():
                out[name].append(asyncio.run(_measure(url, tenant, without, runs, callers)))
        return {"runs": runs, "callers": callers, "rounds": out}
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--callers", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps(main(args.runs, args.callers, args.rounds), indent=2))
