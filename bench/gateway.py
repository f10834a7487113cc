"""Gateway benchmark: the embeddings route under 64 concurrent clients, over real HTTP.

Builds a throwaway database with one CPU device, a tiny BERT embedding model (a real executor
worker runs it) and one tenant; serves the real app with uvicorn on a free loopback port; then
64 clients send ``/v1/embeddings`` calls back to back for ``--seconds``. The clients run in a
separate process, so their own HTTP work is not charged to the gateway. Prints JSON:

* ``req_per_s`` and ``p50_ms``/``p99_ms``: client-measured latency of successful calls;
* ``overhead_ms_p50``: per call, gateway latency minus the executor's own time for that run
  (``device_ms`` from the ledger, found through the ``X-Legato-Run-Id`` header): what the
  gateway, admission, queueing/batching and bookkeeping add;
* ``overhead_ms_p50_single``: the same with one client (no queueing behind other calls);
* ``writer``: commits and rows of the group-commit writer during the 64-client phase.

Run: ``python bench/gateway.py [--seconds 10] [--clients 64]``. Never run as a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import shutil
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
import torch  # noqa: E402
import uvicorn  # noqa: E402

from control.api.app import create_app  # noqa: E402
from control.api.live import LiveOptions, build_inference  # noqa: E402
from control.api.settings import GatewayConfig  # noqa: E402
from control.executor import sources  # noqa: E402
from control.executor.base import DeviceInfo, ModelRef  # noqa: E402
from control.executor.local import ExecutorConfig, LocalExecutor  # noqa: E402
from control.runtime.clock import perf_counter  # noqa: E402
from control.services import build_services  # noqa: E402
from control.services.loadgen import percentile  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.session import make_engine, make_session_factory  # noqa: E402

MODEL = ModelRef("tiny-embed:1", "embed", "tiny", "bert")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stack(root: Path):  # noqa: ANN202
    url = f"sqlite:///{root / 'legato.db'}"
    upgrade(url)
    factory = make_session_factory(make_engine(url))
    services = build_services(factory)
    node = services.nodes.create("bench", name="local")
    services.devices.create("bench", name="cpu:0", node_id=node.id, kind="cpu",
                            memory_mib=2048, is_real=True)  # fmt: skip
    services.models.create("bench", name="tiny-embed", version="1", task="embed",
                           weights_source="declared", weights_location="tiny bert",
                           memory_mib=16, max_batch_size=32, max_batch_tokens=8192)  # fmt: skip
    tenant = services.tenants.create("bench", name="bench", weight=1)
    key = services.api_keys.create_key("bench", tenant.id).plaintext
    cache = root / "models"
    sources.ensure_tiny("bert", cache)
    executor = LocalExecutor(
        ExecutorConfig(cache_dir=str(cache), use_cuda=False, poll_queue=False),
        [DeviceInfo("cpu:0", "cpu", 0, 2048, 0)],
    )
    inference = build_inference(factory, services, executor,
                                LiveOptions(model_refs={"tiny-embed:1": MODEL}))  # fmt: skip
    app = create_app(services, GatewayConfig(key_cache_ttl_s=30), inference=inference)
    return app, services, inference, key


async def _clients(base: str, key: str, clients: int, seconds: float) -> list[tuple[float, str]]:
    """(latency s, run id) of every successful call made by ``clients`` loops."""
    done: list[tuple[float, str]] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, limits=limits, headers=headers) as client:
        stop = perf_counter() + seconds

        async def loop(i: int) -> None:
            n = 0
            while perf_counter() < stop:
                t0 = perf_counter()
                r = await client.post("/v1/embeddings", timeout=60,
                                      json={"model": "tiny-embed", "input": f"client {i} call {n}"})  # fmt: skip
                if r.status_code == 200:
                    done.append((perf_counter() - t0, r.headers["x-legato-run-id"]))
                n += 1

        await asyncio.gather(*(loop(i) for i in range(clients)))
    return done


def _client_process(base: str, key: str, clients: int, seconds: float, out) -> None:  # noqa: ANN001
    start = perf_counter()
    calls = asyncio.run(_clients(base, key, clients, seconds))
    out.put((calls, perf_counter() - start))


async def _run_clients(base: str, key: str, clients: int, seconds: float) -> tuple[list, float]:
    """``_clients`` in a child process (spawned: it shares nothing with the gateway); returns
    the calls and the wall time of the calling phase."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_client_process, args=(base, key, clients, seconds, out))
    proc.start()
    calls = await asyncio.to_thread(out.get)
    await asyncio.to_thread(proc.join)
    return calls


def _overheads(services, calls: list[tuple[float, str]]) -> list[float]:  # noqa: ANN001
    device_ms = {e.request_id: e.device_ms for e in services.usage.list()}
    return [lat * 1000 - device_ms.get(rid, 0) for lat, rid in calls]


async def main(seconds: float, clients: int) -> dict:
    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="legato-bench-"))
    try:
        app, services, inference, key = _stack(root)
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                               log_level="warning", access_log=False,
                                               lifespan="off"))  # fmt: skip
        await inference.start()
        task = asyncio.get_running_loop().create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.05)
        base = f"http://127.0.0.1:{port}"
        await _run_clients(base, key, 4, 1.0)  # warm-up: first batches, caches
        single, _ = await _run_clients(base, key, 1, max(2.0, seconds / 4))
        commits, rows = inference.writer.commits, inference.writer.rows
        calls, wall = await _run_clients(base, key, clients, seconds)
        commits, rows = inference.writer.commits - commits, inference.writer.rows - rows
        server.should_exit = True
        await task
        await inference.stop()
        lat = [c[0] * 1000 for c in calls]
        return {
            "route": "/v1/embeddings",
            "model": "tiny BERT (2 layers, hidden 32), one CPU worker",
            "clients": clients,
            "seconds": round(wall, 2),
            "requests": len(calls),
            "req_per_s": round(len(calls) / wall, 1),
            "p50_ms": round(percentile(lat, 0.5) or 0, 2),
            "p99_ms": round(percentile(lat, 0.99) or 0, 2),
            "overhead_ms_p50": round(percentile(_overheads(services, calls), 0.5) or 0, 2),
            "overhead_ms_p50_single": round(percentile(_overheads(services, single), 0.5) or 0, 2),
            "writer": {
                "commits": commits,
                "rows": rows,
                "rows_per_commit": round(rows / max(1, commits), 2),
            },
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=64)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main(args.seconds, args.clients)), indent=2))
