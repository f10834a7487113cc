"""Critical tenant's latency under a batch tenant's saturating load, with preemptible headroom.

The overload tests' gateway (``tests/faults/overload_server.py``) in a process of its own: two
CPU workers with the tiny embedder (one slot each), ``cpu:1`` reserved for the critical class
and lent preemptibly (``borrowable``), no door headroom. The critical tenant calls
``/v1/embeddings`` in a closed loop, alone, then while eight batch-class callers (another
process, niced as remote clients are) flood the gateway; its p99 under the flood over its p99
alone is ``critical_p99_vs_solo`` (goal <= 1.5). Context: both p50/p99, the flood's answers,
the preemptions the gateway counted, the critical calls that failed.

Run from the repo root: ``python bench/live/preemption.py``; prints one JSON object.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from time import sleep

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from control.clock import perf_counter  # noqa: E402

CALLS = 150  # critical calls per phase
FLOOD_CALLERS = 8


def _p(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def _critical(url: str, key: str, n: int) -> tuple[list[float], int]:
    """``n`` sequential calls of the critical tenant: (latencies in ms of the 200s, failures)."""
    import httpx

    out, failed = [], 0
    with httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as c:
        for i in range(n):
            t0 = perf_counter()
            r = c.post("/v1/embeddings", json={"model": "tiny-embed", "input": f"critical {i}"})
            if r.status_code == 200:
                out.append((perf_counter() - t0) * 1000)
            else:
                failed += 1
    return out, failed


def _preemptions(url: str, token: str) -> float:
    import httpx

    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("legato_preemptions_total{")
    )


def measure() -> dict:
    from db import migrate
    from tests.api.conftest import ADMIN_TOKEN

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template.db"
        migrate.upgrade(f"sqlite:///{template}")
        server = subprocess.Popen(
            [sys.executable, "-m", "tests.faults.overload_server", tmp, str(template), "60",
             "lent"],
            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            started = json.loads(server.stdout.readline())
            url, keys = started["url"], started["keys"]
            _critical(url, keys["vip"], 20)  # warm-up
            solo, solo_failed = _critical(url, keys["vip"], CALLS)
            flood = subprocess.Popen(
                [sys.executable, "-m", "tests.faults.overload_server", "flood", url, keys["f1"],
                 "25", str(FLOOD_CALLERS)],
                cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            assert flood.stdout is not None
            flood.stdout.readline()  # "flooding"
            sleep(2.0)  # the flood fills both devices
            loaded, loaded_failed = _critical(url, keys["vip"], CALLS)
            answers = json.loads(flood.stdout.readline())
            flood.wait(60)
            preempted = _preemptions(url, ADMIN_TOKEN)
        finally:
            if server.stdin is not None:
                server.stdin.close()
            server.wait(60)
    codes = [a[0] for a in answers]
    return {
        "critical_p99_vs_solo": round(_p(loaded, 0.99) / _p(solo, 0.99), 3),
        "critical_p50_vs_solo": round(_p(loaded, 0.5) / _p(solo, 0.5), 3),
        "critical_solo_ms": {"p50": round(_p(solo, 0.5), 2), "p99": round(_p(solo, 0.99), 2)},
        "critical_loaded_ms": {
            "p50": round(_p(loaded, 0.5), 2),
            "p99": round(_p(loaded, 0.99), 2),
        },  # fmt: skip
        "critical_failed": solo_failed + loaded_failed,
        "critical_calls_per_phase": CALLS,
        "flood_answers": len(codes),
        "flood_ok": codes.count(200),
        "preemptions_total": preempted,
        "setup": "2 CPU workers, tiny embedder (1 slot each), cpu:1 reserved for critical "
        "(500 milli of its one-slot pool) and lent preemptibly; 8 batch-class callers",
    }


if __name__ == "__main__":
    print(json.dumps(measure()))
