"""Canary benchmark, live: a canary made to fail is rolled back by the core, and what it cost.

    python bench/live/canary.py

A real gateway over HTTP with one CPU worker process (:mod:`tests.support.canary_world`):
``tiny-embed:1`` serves; version 2 is registered from a folder whose context is 4 positions, so
its forward pass raises on every real text. The operator sends ``FRACTION`` of version 1's
traffic to version 2 with the default rollback settings (``CanaryConfig()``: 20 samples per
variant, error margin 5 points, p99 margin 100%) while ``CONCURRENCY`` clients call
``/v1/embeddings`` back to back. Prints one JSON object:

- ``canary_rolled_back``: the core rolled the canary back by itself (true is the goal);
- ``time_to_rollback_s``: from the PUT that set the canary to the GET that first shows it rolled
  back (polled every 50 ms); ``rollback_reason``: the core's verdict (error rate over the
  margin, or the canary replica's breaker opened by its failures, whichever came first);
- ``requests_affected``: client calls whose step ran on the canary (each failed there and was
  retried on the baseline); ``requests_total`` and ``requests_failed`` (non-200 answers: the
  goal is 0) over the whole run; ``canary_replica_unloaded``: the canary's replica is gone;
- ``p50_ms`` / ``p99_ms`` of the client calls while the canary ran and after its rollback;
- ``healthy_canary_kept``: a second gateway whose version 2 is a healthy copy of version 1
  (same model, same load, ``HEALTHY_S`` seconds) keeps its canary running (no false rollback),
  with ``healthy_canary_share`` of the steps (the goal is ``FRACTION``) and its verdict figures.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from control import native  # noqa: E402

native.install()  # before the core is imported: the compiled core when a build is current

from control.clock import perf_counter  # noqa: E402
from control.core.canary_stats import CanaryConfig  # noqa: E402
from db import migrate  # noqa: E402
from tests.support.canary_world import BASELINE, CANARY, canary_gateway  # noqa: E402

TOKEN = "bench-canary-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
FRACTION = 0.2
CONCURRENCY = 8
AFTER_S = 3.0  # traffic kept going after the rollback, to see it back on the baseline
LIMIT_S = 60.0
HEALTHY_S = 30.0


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


async def _client_loop(client: httpx.AsyncClient, key: str, stop: asyncio.Event,
                       out: list[tuple[float, float, int]], who: int) -> None:  # fmt: skip
    auth, i = {"Authorization": f"Bearer {key}"}, 0
    while not stop.is_set():
        start = perf_counter()
        r = await client.post("/v1/embeddings", headers=auth, json={
            "model": BASELINE, "input": f"client {who} sends sentence number {i}"})  # fmt: skip
        out.append((start, perf_counter() - start, r.status_code))
        i += 1


async def _run(url: str, key: str) -> dict[str, Any]:
    calls: list[tuple[float, float, int]] = []
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=url, timeout=90,
                                 limits=httpx.Limits(max_connections=32)) as client:  # fmt: skip
        warm = await client.post("/v1/embeddings", headers={"Authorization": f"Bearer {key}"},
                                 json={"model": BASELINE, "input": "warm up"})  # fmt: skip
        assert warm.status_code == 200, warm.text
        loops = [asyncio.create_task(_client_loop(client, key, stop, calls, w))
                 for w in range(CONCURRENCY)]  # fmt: skip
        set_at = perf_counter()
        r = await client.put("/admin/models/tiny-embed/canary", headers=ADMIN,
                             json={"version": "2", "fraction": FRACTION})  # fmt: skip
        assert r.status_code == 200, r.text
        state, back_at = r.json(), None
        while perf_counter() - set_at < LIMIT_S:
            state = (await client.get("/admin/models/tiny-embed/canary", headers=ADMIN)).json()
            if state["state"] == "rolled_back":
                back_at = perf_counter()
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(AFTER_S)
        stop.set()
        await asyncio.gather(*loops)
        final = (await client.get("/admin/models/tiny-embed/canary", headers=ADMIN)).json()
        snap = (await client.get("/admin/snapshot", headers=ADMIN)).json()
    during = [lat for at, lat, _ in calls if back_at is None or at < back_at]
    after = [lat for at, lat, _ in calls if back_at is not None and at >= back_at]
    return {
        "canary_rolled_back": state["state"] == "rolled_back",
        "time_to_rollback_s": None if back_at is None else round(back_at - set_at, 3),
        "rollback_reason": state.get("reason"),
        "requests_affected": (final.get("canary") or {}).get("requests"),
        "requests_total": len(calls),
        "requests_failed": sum(1 for *_, status in calls if status != 200),
        "canary_replica_unloaded": not [x for x in snap["replicas"] if x["model_key"] == CANARY],
        "p50_ms_during_canary": _pct(during, 0.5),
        "p99_ms_during_canary": _pct(during, 0.99),
        "p50_ms_after_rollback": _pct(after, 0.5),
        "p99_ms_after_rollback": _pct(after, 0.99),
        "mean_ms": round(statistics.fmean(lat for _, lat, _ in calls) * 1000, 2) if calls else None,
        "fraction": FRACTION,
        "concurrency": CONCURRENCY,
        "min_samples": CanaryConfig().min_samples,
    }


async def _healthy(url: str, key: str) -> dict[str, Any]:
    """A healthy canary under the same load for ``HEALTHY_S``: kept, and its share."""
    calls: list[tuple[float, float, int]] = []
    stop = asyncio.Event()
    async with httpx.AsyncClient(base_url=url, timeout=90,
                                 limits=httpx.Limits(max_connections=32)) as client:  # fmt: skip
        loops = [asyncio.create_task(_client_loop(client, key, stop, calls, w))
                 for w in range(CONCURRENCY)]  # fmt: skip
        r = await client.put("/admin/models/tiny-embed/canary", headers=ADMIN,
                             json={"version": "2", "fraction": FRACTION})  # fmt: skip
        assert r.status_code == 200, r.text
        await asyncio.sleep(HEALTHY_S)
        state = (await client.get("/admin/models/tiny-embed/canary", headers=ADMIN)).json()
        stop.set()
        await asyncio.gather(*loops)
    canary, baseline = state["canary"], state["baseline"]
    ms = lambda s: None if s is None else round(s * 1000, 2)  # noqa: E731
    return {
        "healthy_canary_kept": state["state"] == "running",
        "healthy_canary_share": round(
            canary["requests"] / max(1, canary["requests"] + baseline["requests"]), 3
        ),
        "healthy_p99_ms": {"canary": ms(canary["p99_s"]), "baseline": ms(baseline["p99_s"])},
        "healthy_requests_failed": sum(1 for *_, status in calls if status != 200),
    }


def measure() -> dict[str, Any]:
    """Run both scenarios once (about a minute and a half here); returns the figures above."""
    with tempfile.TemporaryDirectory(prefix="bench-canary-") as tmp:
        root = Path(tmp)
        template = root / "template.db"
        migrate.upgrade(f"sqlite:///{template}")
        with canary_gateway(root / "failing", template, TOKEN, CanaryConfig()) as gw:
            out = asyncio.run(_run(gw.url, gw.tenant_key))
        with canary_gateway(root / "healthy", template, TOKEN, CanaryConfig(), healthy=True) as gw:
            out.update(asyncio.run(_healthy(gw.url, gw.tenant_key)))
        return out


if __name__ == "__main__":
    print(json.dumps(measure()))
