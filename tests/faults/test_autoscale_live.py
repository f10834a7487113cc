"""Autoscaling live (issue 24, item 5), over real HTTP with real worker processes: the tiny
embedder starts with one replica on ``cpu:0`` of two CPU workers; an operator sets its
autoscaling through the admin API (``PATCH /admin/models/{id}``) and the live core takes it.

Expected: a burst scales it out to a second replica on ``cpu:1`` that serves part of the burst;
after ``idle_ms`` without work it drains back to one; lowering ``max_replicas`` during a burst
drains a busy replica and no request fails; with ``min_replicas`` 0 it scales to zero and the
next request cold-starts it and is served; ``/metrics`` counts the scale events.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
import torch

from control.api.settings import GatewayConfig
from control.executor.protocol import DeviceInfo
from control.runtime.live import InitialReplica
from tests.api.conftest import ADMIN_TOKEN
from tests.app.stack import serve_in_thread
from tests.faults.overload_server import REFS, steps_by_device
from tests.support.live_gateway import live_app, live_world, seed_embed_fleet

torch.set_num_threads(1)
pytestmark = [pytest.mark.slow]

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
MODEL = "tiny-embed:1"
DEVICES = ("cpu:0", "cpu:1")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("autoscale"), _sqlite_template, archs=("bert",))
    services = world.services
    seed_embed_fleet(services, max_batch_size=4, max_batch_tokens=8192)
    (node,) = services.nodes.list(name="local")
    services.devices.create("test", name="cpu:1", node_id=node.id, kind="cpu", memory_mib=2048,
                            precisions=["fp32"], is_real=True)  # fmt: skip
    tenant = services.tenants.create("test", name="t", weight=1, priority_class="standard")
    key = services.api_keys.create_key("test", tenant.id).plaintext
    (model,) = services.models.list(name="tiny-embed")
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=60.0),
                   memory_mib=2048, placement=[InitialReplica(MODEL, "cpu:0")],
                   devices=[DeviceInfo(d, "cpu", i, 2048, cpu_core=i)
                            for i, d in enumerate(DEVICES)],
                   start_with_app=True)  # fmt: skip
    served = serve_in_thread(app)
    yield {"url": served.url, "key": key, "model_id": model.id}
    served.stop()


def _admin(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers=ADMIN, timeout=30)


def _set(url: str, model_id: int, **settings: object) -> None:
    with _admin(url) as admin:
        r = admin.patch(f"/admin/models/{model_id}", json=settings)
    assert r.status_code == 200, r.text
    assert r.headers["X-Legato-Live-Config"].startswith("applied"), r.headers


def _replicas(url: str) -> list[dict]:
    with _admin(url) as admin:
        snap = admin.get("/admin/snapshot").json()
    return [r for r in snap["replicas"] if r["model_key"] == MODEL]


def _counter(url: str, name: str) -> int:
    with _admin(url) as admin:
        return admin.get("/admin/snapshot").json()["counters"].get(name, 0)


def _wait(check, what: str, timeout_s: float) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


async def _load(url: str, key: str, seconds: float, callers: int = 24) -> list[int]:
    """``callers`` closed-loop callers for ``seconds``; every answer's status."""
    codes: list[int] = []
    until = time.monotonic() + seconds

    async def caller(client: httpx.AsyncClient, i: int) -> None:
        n = 0
        while time.monotonic() < until:
            r = await client.post("/v1/embeddings", json={"model": "tiny-embed",
                                                          "input": f"burst {i} {n} " * 80})  # fmt: skip
            codes.append(r.status_code)
            n += 1

    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=callers + 4)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as c:
        await asyncio.gather(*(caller(c, i) for i in range(callers)))
    return codes


def test_a_burst_scales_out_and_idle_scales_back_in(gateway) -> None:
    url, key, model_id = gateway["url"], gateway["key"], gateway["model_id"]
    assert len(_replicas(url)) == 1
    _set(url, model_id, min_replicas=1, max_replicas=2, scale_out_delay_ms=50, idle_ms=2500)
    codes = asyncio.run(_load(url, key, seconds=6.0))
    assert codes and set(codes) == {200}
    assert _counter(url, "autoscale.scale_out") == 1  # one more, never past max_replicas
    assert set(steps_by_device(url)["t"]) == {1, 2}  # the new replica on cpu:1 served too
    _wait(lambda: len(_replicas(url)) == 1, "the idle replica to drain", 30)
    assert _counter(url, "autoscale.drained") == 1


def test_lowering_max_drains_a_busy_replica_and_no_request_fails(gateway) -> None:
    url, key, model_id = gateway["url"], gateway["key"], gateway["model_id"]
    _set(url, model_id, min_replicas=1, max_replicas=2, scale_out_delay_ms=50, idle_ms=60_000)
    drained = _counter(url, "autoscale.drained")

    async def scenario() -> list[int]:
        load = asyncio.create_task(_load(url, key, seconds=10.0))
        deadline = time.monotonic() + 9.0
        while len([r for r in await asyncio.to_thread(_replicas, url)
                   if r["state"] == "ready"]) < 2:  # fmt: skip
            assert time.monotonic() < deadline, "no scale-out during the burst"
            await asyncio.sleep(0.2)
        await asyncio.to_thread(_set, url, model_id, max_replicas=1)  # drains one, under load
        return await load

    codes = asyncio.run(scenario())
    assert codes and set(codes) == {200}  # the drain aborted nothing
    _wait(lambda: _counter(url, "autoscale.drained") == drained + 1, "the drain to end", 30)
    assert len(_replicas(url)) == 1


def test_scale_to_zero_then_a_cold_start_serves_the_next_request(gateway) -> None:
    url, key, model_id = gateway["url"], gateway["key"], gateway["model_id"]
    _set(url, model_id, min_replicas=0, max_replicas=1, idle_ms=1500)
    _wait(lambda: _replicas(url) == [], "scale to zero", 30)
    cold = _counter(url, "loads.cold_starts")
    r = httpx.post(f"{url}/v1/embeddings", json={"model": "tiny-embed", "input": "wake up"},
                   headers={"Authorization": f"Bearer {key}"}, timeout=60)  # fmt: skip
    assert r.status_code == 200, r.text
    assert _counter(url, "loads.cold_starts") == cold + 1
    metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert 'legato_scale_events{event="scale_out"}' in metrics
    assert "legato_preload_hit_rate" in metrics
