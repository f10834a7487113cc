"""Live planner benchmark: p99 of the embedding route before and after a proposed plan.

A throwaway SQLite database, the real gateway served by uvicorn on a loopback port, two CPU
executor workers (``cpu:0``, ``cpu:1``) and MiniLM (all-MiniLM-L6-v2, the real embedder) with
batches of one, so that one replica's capacity is 1 / its service time and the planner's
replica arithmetic is what decides. The deliberately poor placement: one replica on ``cpu:0``.

1. Calibration: 30 sequential calls; the median device time the ledger billed them is the
   service time, and the offered rate is ``LOAD`` (0.9) of one replica's capacity, which the
   planner (70 % target utilization) sizes at ceil(0.9 / 0.7) = 2 replicas.
2. Before: open-loop Poisson arrivals (``/v1/embeddings`` over real HTTP) for ``PHASE_S``;
   p99 of client-measured latency.
3. ``POST /admin/placement-plans/propose`` from the demand observed over that phase (the usage
   ledger and the requests table), ``/simulate`` (the twin's replay of the phase's traffic),
   then ``/rollout`` once the plan is simulated; wait until the rollout completes.
4. After: the same arrivals (same seed) for ``PHASE_S``.

``planner_p99_ratio_vs_current`` = p99 after / p99 before: LOWER IS BETTER (below 1: the
proposed plan served the same load with a lower p99 than the poor placement). Context keys:
both p99s and p50s, the offered rate, the service time, the plan's placements, the twin's
predicted p99 for the current placement and the plan, and the machine's CPU count (two workers
on a shared two-core machine contend with the gateway and the clients for CPU; the ratio is
honest about that, it is not corrected for it).

    python bench/live/planner.py
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx  # noqa: E402
import torch  # noqa: E402
import uvicorn  # noqa: E402
from sqlalchemy import select  # noqa: E402

from control.api.settings import GatewayConfig  # noqa: E402
from control.clock import perf_counter  # noqa: E402
from control.executor.host import ExecutorConfig, LocalExecutor  # noqa: E402
from control.executor.protocol import DeviceInfo, ModelRef  # noqa: E402
from control.runtime.live import InitialReplica  # noqa: E402
from control.services import build_services  # noqa: E402
from control.services.loadgen import percentile  # noqa: E402
from control.services.plan_simulation import PlanSimulator  # noqa: E402
from control.wiring.gateway import gateway_app  # noqa: E402
from control.wiring.live import LiveOptions  # noqa: E402
from db import models as m  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.session import make_engine, make_session_factory  # noqa: E402

ADMIN = "bench-admin-token-0123456789"
MODEL = ModelRef("minilm:1", "embed", "minilm")
PHASE_S = 25.0
LOAD = 0.9
TEXT = " ".join(["the planner sizes replicas from the demand it observed"] * 12)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stack(root: Path):  # noqa: ANN202
    url = f"sqlite:///{root / 'legato.db'}"
    upgrade(url)
    factory = make_session_factory(make_engine(url))
    services = build_services(factory)
    node = services.nodes.create("bench", name="local")
    for i in range(2):
        services.devices.create("bench", name=f"cpu:{i}", node_id=node.id, kind="cpu",
                                memory_mib=2048, is_real=True)  # fmt: skip
    services.models.create("bench", name="minilm", version="1", task="embed",
                           weights_source="declared", weights_location="minilm package",
                           memory_mib=128, max_batch_size=1)  # fmt: skip
    tenant = services.tenants.create("bench", name="bench", weight=1)
    key = services.api_keys.create_key("bench", tenant.id).plaintext
    executor = LocalExecutor(
        ExecutorConfig(use_cuda=False, poll_queue=False),
        [DeviceInfo(f"cpu:{i}", "cpu", i, 2048, 0) for i in range(2)],
    )
    options = LiveOptions(model_refs={"minilm:1": MODEL},
                          placement=[InitialReplica("minilm:1", "cpu:0")])  # fmt: skip
    app = gateway_app(services, GatewayConfig(admin_token=ADMIN, key_cache_ttl_s=30), executor,
                      options, start_with_app=False)  # fmt: skip
    app.state.gateway.extras["plan_simulator"] = PlanSimulator(factory, url, root)
    return app, key, factory


def _device_s(factory) -> float:  # noqa: ANN001
    """Median billed device seconds of the calls so far after the first five (warm-up): the
    ledger, which is what the planner reads."""
    with factory() as s:
        ms = list(s.scalars(select(m.UsageEntry.device_ms).order_by(m.UsageEntry.id)))[5:]
    return float(percentile(ms, 0.5)) / 1000.0


async def _call(client: httpx.AsyncClient, key: str) -> float | None:
    t0 = perf_counter()
    r = await client.post("/v1/embeddings", json={"model": "minilm", "input": TEXT},
                          headers={"Authorization": f"Bearer {key}"})  # fmt: skip
    return perf_counter() - t0 if r.status_code == 200 else None


async def _phase(client: httpx.AsyncClient, key: str, rate: float, seed: int) -> list[float]:
    """Open-loop Poisson arrivals at ``rate`` for PHASE_S; latencies of the calls that ended 200."""
    rng, tasks, t = random.Random(seed), [], 0.0
    start = perf_counter()
    while t < PHASE_S:
        await asyncio.sleep(max(0.0, start + t - perf_counter()))
        tasks.append(asyncio.create_task(_call(client, key)))
        t += rng.expovariate(rate)
    return sorted(x for x in await asyncio.gather(*tasks) if x is not None)


async def _admin(client: httpx.AsyncClient, method: str, path: str, body=None):  # noqa: ANN001, ANN202
    r = await client.request(method, path, json=body, headers={"Authorization": f"Bearer {ADMIN}"})
    if r.status_code >= 400:
        raise RuntimeError(f"{method} {path}: {r.status_code} {r.text}")
    return r.json()


async def _until(client: httpx.AsyncClient, path: str, done, timeout: float = 300.0):  # noqa: ANN001, ANN202
    for _ in range(int(timeout / 0.5)):
        got = await _admin(client, "GET", path)
        if done(got):
            return got
        await asyncio.sleep(0.5)
    raise RuntimeError(f"timed out waiting on {path}")


async def _plan(client: httpx.AsyncClient) -> tuple[dict, list]:
    plan = await _admin(client, "POST", "/admin/placement-plans/propose", {"window_s": PHASE_S + 5})
    pid = plan["id"]
    await _admin(
        client, "POST", f"/admin/placement-plans/{pid}/simulate", {"window_s": PHASE_S + 5}
    )
    plan = await _until(client, f"/admin/placement-plans/{pid}",
                        lambda p: (p["simulation"] or {}).get("state") != "running")  # fmt: skip
    await _admin(client, "POST", f"/admin/placement-plans/{pid}/rollout", {})
    await _until(
        client, f"/admin/placement-plans/{pid}/rollout", lambda p: p["state"] == "completed"
    )
    placed = await _admin(client, "GET", f"/admin/placements?plan_id={pid}")
    return plan, [(p["device_ids"], p["replicas"]) for p in placed["items"]]


async def _run() -> dict:
    root = Path(tempfile.mkdtemp(prefix="legato-planner-bench-"))
    app, key, factory = _stack(root)
    inference = app.state.gateway.inference
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False, lifespan="off"))  # fmt: skip
    await inference.start()
    task = asyncio.get_running_loop().create_task(server.serve())
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=64)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits,
                                     timeout=120.0) as client:  # fmt: skip
            while not server.started:
                await asyncio.sleep(0.05)
            for _ in range(30):
                await _call(client, key)
            service_s = _device_s(factory)
            rate = LOAD / service_s
            before = await _phase(client, key, rate, seed=1)
            plan, placed = await _plan(client)
            after = await _phase(client, key, rate, seed=1)
    finally:
        server.should_exit = True
        await task
        await inference.stop()
    p99_b, p99_a = percentile(before, 0.99), percentile(after, 0.99)
    sim = plan.get("simulation") or {}
    return {
        "planner_p99_ratio_vs_current": round(p99_a / p99_b, 3),
        "ratio_direction": "p99 after / p99 before: lower is better",
        "p99_before_ms": round(p99_b * 1000, 1), "p99_after_ms": round(p99_a * 1000, 1),
        "p50_before_ms": round(percentile(before, 0.5) * 1000, 1),
        "p50_after_ms": round(percentile(after, 0.5) * 1000, 1),
        "served_before": len(before), "served_after": len(after),
        "offered_rps": round(rate, 2), "service_ms": round(service_s * 1000, 2),
        "plan_placements": placed,
        "twin_p99_current_ms": _ms((sim.get("current") or {}).get("p99_s")),
        "twin_p99_plan_ms": _ms((sim.get("plan") or {}).get("p99_s")),
        "simulation_state": sim.get("state"), "cpus": os.cpu_count(),
    }  # fmt: skip


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000, 1)


def measure() -> dict:
    """Run the benchmark (about two minutes here); see the module docstring for the keys."""
    torch.set_num_threads(1)
    return asyncio.run(_run())


if __name__ == "__main__":
    print(json.dumps(measure()))
