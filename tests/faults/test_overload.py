"""Fault: overload at ~10x capacity (issue 22, item 8).

A real gateway over HTTP (uvicorn on a loopback port, the real app, core, live runtime and one
CPU worker with a tiny real embedding model). First the critical tenant's solo p99 over N
sequential calls; then three batch-class tenants flood the gateway for a short window (many
concurrent callers each) while the critical tenant keeps calling at its solo pace.

Expected: every refused call is a 429 with an integer ``Retry-After`` >= 1 and a JSON body
that says why; no admitted run times out (504): admission by capacity refuses, at the door,
the runs predicted to wait past the caller's timeout; the critical tenant's p99 stays within
1.5x of its solo p99 (lower classes are refused first).
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
import torch

from control.api.settings import GatewayConfig
from control.executor.protocol import ModelRef
from control.runtime.live import InitialReplica
from tests.api.conftest import ADMIN_TOKEN
from tests.app.stack import serve_in_thread
from tests.support.live_gateway import live_app, live_world

torch.set_num_threads(1)
pytestmark = [pytest.mark.slow]

REFS = {"tiny-embed:1": ModelRef("tiny-embed:1", "embed", "tiny", "bert")}
TIMEOUT_S = 1.0  # the sync timeout: short, so overload would time runs out within seconds
SOLO_CALLS = 30
WINDOW_S = 4.0
FLOODERS = ("f1", "f2", "f3")
CALLERS_EACH = 24  # concurrent callers per flooding tenant: far past one CPU worker
FIGURES: dict = {}


def _seed(services) -> dict[str, str]:  # noqa: ANN001
    node = services.nodes.create("test", name="local")
    services.devices.create("test", name="cpu:0", node_id=node.id, kind="cpu", memory_mib=2048,
                            precisions=["fp32"], is_real=True)  # fmt: skip
    services.models.create("test", name="tiny-embed", version="1", task="embed",
                           weights_source="declared", weights_location="tiny test model",
                           memory_mib=16, max_batch_size=1, max_batch_tokens=8192)  # fmt: skip
    keys = {}
    for name, cls in [("vip", "critical"), *((f, "batch") for f in FLOODERS)]:
        tenant = services.tenants.create("test", name=name, weight=1, priority_class=cls)
        keys[name] = services.api_keys.create_key("test", tenant.id).plaintext
    return keys


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("overload"), _sqlite_template, archs=("bert",))
    keys = _seed(world.services)
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=TIMEOUT_S),
                   memory_mib=2048, placement=[InitialReplica("tiny-embed:1", "cpu:0")],
                   start_with_app=True)  # fmt: skip
    served = serve_in_thread(app)
    yield served.url, keys
    served.stop()


async def _call(client: httpx.AsyncClient, key: str, text: str) -> tuple[httpx.Response, float]:
    start = time.perf_counter()
    r = await client.post("/v1/embeddings", json={"model": "tiny-embed", "input": text},
                          headers={"Authorization": f"Bearer {key}"})  # fmt: skip
    return r, time.perf_counter() - start


def _p99(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def _paced(client, key: str, n: int, pace_s: float, until: float | None) -> list:  # noqa: ANN001
    """``n`` sequential calls (or calls until ``until``), one every ``pace_s`` at most."""
    out = []
    while len(out) < n if until is None else time.perf_counter() < until:
        r, took = await _call(client, key, f"critical call {len(out)}")
        out.append((r, took))
        await asyncio.sleep(max(0.0, pace_s - took))
    return out


async def _flood(client, key: str, until: float) -> list:  # noqa: ANN001
    out = []
    while time.perf_counter() < until:
        r, _ = await _call(client, key, f"flood text {len(out)} " * 120)
        out.append(r)
    return out


async def _scenario(url: str, keys: dict[str, str]) -> tuple[list, list, list]:
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S + 20, limits=limits) as client:
        warm, _ = await _call(client, keys["vip"], "warm")
        assert warm.status_code == 200, warm.text
        solo = await _paced(client, keys["vip"], SOLO_CALLS, 0.05, None)
        pace = sum(t for _, t in solo) / len(solo) + 0.05
        until = time.perf_counter() + WINDOW_S
        floods = [_flood(client, keys[f], until) for f in FLOODERS for _ in range(CALLERS_EACH)]
        crit, *flooded = await asyncio.gather(_paced(client, keys["vip"], 0, pace, until), *floods)
        return solo, crit, [r for rs in flooded for r in rs]


@pytest.mark.xfail(
    strict=False,
    reason="open (issue 22 item 8): on a 2-core machine the gateway's own path is the "
    "bottleneck, not the model queue the core predicts from: in a probe the core started 212 "
    "runs and all 212 succeeded with an empty replica queue at the end, yet 78 callers got 504 "
    "(the run ended in the core after the caller's 1 s wait: submit/record/settle, HTTP and "
    "SQLite commits on one loop); critical p99 2.4-6.4 s against 0.05 s solo",
)
def test_overload_refuses_at_the_door_and_keeps_the_critical_tenant_served(gateway):
    url, keys = gateway
    solo, crit, flood = asyncio.run(_scenario(url, keys))
    assert {r.status_code for r, _ in solo} == {200}
    codes = [r.status_code for r in flood]
    FIGURES.update(
        solo_p99_s=_p99([t for _, t in solo]),
        overload_p99_s=_p99([t for _, t in crit]),
        flood={c: codes.count(c) for c in sorted(set(codes))},
        critical={
            c: sum(1 for r, _ in crit if r.status_code == c)
            for c in {r.status_code for r, _ in crit}
        },
    )
    print("overload figures:", FIGURES)
    assert codes.count(429) > 0, FIGURES  # it was overloaded: capacity refused some
    assert set(codes) <= {200, 429}, FIGURES  # no 504: nothing admitted timed out
    for r in flood:
        if r.status_code == 429:
            retry = r.headers.get("Retry-After")
            assert retry is not None and retry.isdigit() and int(retry) >= 1, r.headers
            assert "not admitted" in r.json()["detail"], r.text
    assert {r.status_code for r, _ in crit} == {200}, FIGURES
    assert FIGURES["overload_p99_s"] <= 1.5 * FIGURES["solo_p99_s"], FIGURES
