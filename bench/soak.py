"""Soak benchmark: the embeddings route at 0.7 of measured capacity for ``--minutes``, with the
executor worker killed (SIGKILL) every ``--kill-every-s``, over real HTTP and a real worker.

Builds the gateway bench's stack (:func:`bench.gateway._stack`: a throwaway SQLite database,
one CPU device, the tiny BERT embedding model on one real executor worker) with two more
tenants, serves it with uvicorn on a free loopback port, probes capacity with a short
closed-loop phase (8 clients, 5 s), then sends open-loop ``/v1/embeddings`` calls from three
tenants at 0.7 of it. Prints one JSON object:

* ``requests``: calls sent in the open-loop phase; ``lost``: calls never answered with a
  success (a 5xx, a timeout or a broken connection; 429 refusals are counted apart in
  ``refused_429``, they were never accepted); ``errors_5xx``;
* ``double_billed``: ledger entries (``usage_entries``) beyond the first for one
  ``(request, node)``: a one-node embedding run is billed exactly once however often its
  worker died, so any extra entry is a step billed twice;
* ``rss_growth_pct`` (goal < 5): RSS of the gateway process at the end vs after the
  warm-up (the first minute, or the first third of a shorter run); ``rss_growth_pct_worker``
  the same for the worker alive at each moment (a restarted worker starts small again);
* ``p99_ms_first_minute`` / ``p99_ms_last_minute``: client latency of successful calls;
* ``lost_reasons``: the five commonest answers of lost calls (status and the body's head;
  status 0 with the httpx error's name for a call never answered), to find the path at fault.

Not yet covered: multi-step workflow runs in the mix (only the embedding route is driven).
The load generator runs in the gateway's process (httpx on the same loop), so capacity is what
gateway plus client manage together on these cores.

The warm-up baseline is honest about windows that fill: the runtime's billed keys and the
core's request ids are remembered for 900 s, so they fill for 15 minutes after it; they are
compact (the core's ``window.RecentKeys``) so that a full window is a few MB, not a moved baseline.
``--trace FRAMES`` runs the gateway under tracemalloc and prints to stderr what grew between
the warm-up and the end, by traceback (slow: its figures are not comparable).

Run: ``python bench/soak.py [--minutes 20] [--kill-every-s 120] [--trace 8]``. Never run as a
timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import tracemalloc
from array import array
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import torch  # noqa: E402
from sqlalchemy import text  # noqa: E402

from bench.gateway import _serving, _stack  # noqa: E402  (installs the native core first)
from control.clock import perf_counter  # noqa: E402
from control.services.loadgen import percentile  # noqa: E402
from db.session import make_engine  # noqa: E402

TENANTS = ("bench", "soak-b", "soak-c")
TIMEOUT_S = 30.0
#: What each call that was never answered with a success got back (status and body head).
REASONS: Counter = Counter()
#: ``--trace``: tracemalloc snapshots by name (``warm``, ``end``).
SNAPSHOTS: dict = {}


class Calls:
    """The open loop's record of its calls, (start, ms, status) each, in three arrays: 18 bytes
    a call. It lives in the gateway's process (the load runs on its loop), where a list of
    tuples (~120 bytes a call, ~24 MB in 20 minutes) counted in the gateway's RSS growth."""

    def __init__(self) -> None:
        self.start, self.ms, self.status = array("d"), array("d"), array("h")

    def append(self, call: tuple[float, float, int]) -> None:
        self.start.append(call[0])
        self.ms.append(call[1])
        self.status.append(call[2])

    def __len__(self) -> int:
        return len(self.status)

    def __iter__(self):  # noqa: ANN204
        return zip(self.start, self.ms, self.status, strict=True)


def _snap(rss: dict, name: str, pid: int | None) -> None:
    """Sample RSS (gateway, worker) under ``name``; with ``--trace`` a tracemalloc snapshot too."""
    rss[name] = (_rss_kib(os.getpid()), _rss_kib(pid))
    if tracemalloc.is_tracing():
        SNAPSHOTS[name] = tracemalloc.take_snapshot().filter_traces(
            (tracemalloc.Filter(False, tracemalloc.__file__),)
        )


def _trace_report(top: int = 25) -> None:
    """Print to stderr what grew between the warm-up and the end snapshots, by traceback."""
    warm, end = SNAPSHOTS.get("warm"), SNAPSHOTS.get("end")
    if warm is None or end is None:
        return
    for stat in end.compare_to(warm, "traceback")[:top]:
        print(f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks", file=sys.stderr)
        for line in stat.traceback.format(limit=6, most_recent_first=True):
            print("    " + line, file=sys.stderr)


def _rss_kib(pid: int | None) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


async def _call(client: httpx.AsyncClient, key: str, n: int, out) -> None:  # noqa: ANN001
    start = perf_counter()
    try:
        r = await client.post("/v1/embeddings", headers={"Authorization": f"Bearer {key}"},
                              json={"model": "tiny-embed", "input": f"soak text {n}"})  # fmt: skip
        status = r.status_code
        if status >= 500:
            REASONS[f"{status} {r.text[:160]}"] += 1
    except httpx.HTTPError as exc:
        status = 0  # timeout or broken connection: never answered
        REASONS[f"0 {type(exc).__name__}"] += 1
    out.append((start, (perf_counter() - start) * 1000.0, status))


async def _probe(client: httpx.AsyncClient, key: str, seconds: float = 5.0) -> float:
    """Closed-loop capacity: successful calls per second of 8 back-to-back clients."""
    done: list = []
    end = perf_counter() + seconds

    async def loop(c: int) -> None:
        n = 0
        while perf_counter() < end:
            await _call(client, key, c * 1_000_000 + n, done)
            n += 1

    await asyncio.gather(*(loop(c) for c in range(8)))
    return sum(1 for _, _, s in done if s == 200) / seconds


async def _killer(worker, every_s: float, end: float, kills: list) -> None:  # noqa: ANN001
    while perf_counter() + every_s < end:
        await asyncio.sleep(every_s)
        pid = worker()
        if pid:
            os.kill(pid, signal.SIGKILL)
            kills.append(pid)


async def _open_loop(client, keys, rate, seconds, worker, kill_every_s):  # noqa: ANN001, ANN202
    """Poisson arrivals at ``rate``/s; RSS sampled after warm-up and at the end."""
    out = Calls()
    kills: list = []
    t0 = perf_counter()
    end = t0 + seconds
    warm = min(60.0, seconds / 3)
    rss: dict = {}
    killer = asyncio.get_running_loop().create_task(_killer(worker, kill_every_s, end, kills))
    pending: set = set()
    n = 0
    while (now := perf_counter()) < end:
        if "warm" not in rss and now - t0 >= warm:
            _snap(rss, "warm", worker())
        task = asyncio.ensure_future(_call(client, keys[n % len(keys)], n, out))
        pending.add(task)
        task.add_done_callback(pending.discard)
        n += 1
        await asyncio.sleep(random.expovariate(rate))
    _snap(rss, "end", worker())
    killer.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return out, kills, rss, t0


def _double_billed(db: Path) -> int:
    sql = text("SELECT COALESCE(SUM(c - 1), 0) FROM (SELECT COUNT(*) AS c FROM usage_entries "
               "GROUP BY request_id, node_id HAVING COUNT(*) > 1) AS d")  # fmt: skip
    engine = make_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return int(conn.execute(sql).scalar() or 0)
    finally:
        engine.dispose()


def _growth(before: int, after: int) -> float | None:
    return round(100.0 * (after - before) / before, 2) if before else None


def _summary(out, kills, rss, t0, seconds, capacity, rate, billed) -> dict:  # noqa: ANN001
    ok = [(s, ms) for s, ms, st in out if st == 200]
    first = [ms for s, ms in ok if s - t0 < 60.0]
    last = [ms for s, ms in ok if s - t0 >= max(0.0, seconds - 60.0)]
    return {
        "requests": len(out),
        "lost": sum(1 for _, _, st in out if st != 200 and st != 429),
        "double_billed": billed,
        "errors_5xx": sum(1 for _, _, st in out if st >= 500),
        "refused_429": sum(1 for _, _, st in out if st == 429),
        "rss_growth_pct": _growth(rss["warm"][0], rss["end"][0]),
        "rss_growth_pct_worker": _growth(rss["warm"][1], rss["end"][1]),
        "p99_ms_first_minute": round(percentile(first, 0.99), 1) if first else None,
        "p99_ms_last_minute": round(percentile(last, 0.99), 1) if last else None,
        "capacity_req_per_s": round(capacity, 1),
        "rate_req_per_s": round(rate, 1),
        "minutes": round(seconds / 60.0, 2),
        "workers_killed": len(kills),
        "rss_kib": {"warm": rss["warm"], "end": rss["end"]},
        "lost_reasons": dict(REASONS.most_common(5)),
    }


async def main(minutes: float, kill_every_s: float) -> dict:
    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="legato-soak-"))
    try:
        app, services, inference, key, _ = _stack(root, frozenset(), None)
        keys = [key] + [
            services.api_keys.create_key("bench", services.tenants.create(
                "bench", name=name, weight=1).id).plaintext
            for name in TENANTS[1:]
        ]  # fmt: skip
        server, serving, base = await _serving(app, inference)
        worker = lambda: inference.runtime.executor.worker_pid("cpu:0")  # noqa: E731
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
        async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT_S,
                                     limits=limits) as client:  # fmt: skip
            capacity = await _probe(client, key)
            rate = max(1.0, 0.7 * capacity)
            seconds = minutes * 60.0
            out, kills, rss, t0 = await _open_loop(client, keys, rate, seconds, worker,
                                                   kill_every_s)  # fmt: skip
        server.should_exit = True
        await serving
        await inference.stop()
        billed = _double_billed(root / "legato.db")
        return _summary(out, kills, rss, t0, seconds, capacity, rate, billed)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--kill-every-s", type=float, default=120.0)
    parser.add_argument(
        "--trace",
        type=int,
        default=0,
        metavar="FRAMES",
        help="tracemalloc with FRAMES frames: print what grew after warm-up "
        "to stderr (slows the gateway: its figures are not comparable)",
    )
    args = parser.parse_args()
    if args.trace:
        tracemalloc.start(args.trace)
    result = asyncio.run(main(args.minutes, args.kill_every_s))
    _trace_report()
    print(json.dumps(result))
