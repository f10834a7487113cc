"""A live gateway serving an agent-shaped workflow whose two parallel branches differ in depth,
for critical-path step order (issue 26, item 4): the live test and
``bench/twin/critical_path_live.py`` share it.

``fork``: a router tool passes the query to two branches on one shared tiny GPT-2 (``brief``,
a short answer that ends there, and ``plan``), and ``plan``'s text goes on to ``act`` on a
second tiny GPT-2 that batches up to eight sequences and writes much more. The shared model
takes one step at a time on its own CPU worker, ``act``'s model runs on another. Under a burst
the shared model's queue holds both branches of many runs: today's order serves them by ready
time (then step key: ``brief`` before ``plan``), critical-path order serves every ``plan``
(more work ahead) first, so ``act`` starts sooner.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx

from control.api.settings import GatewayConfig
from control.executor.protocol import DeviceInfo, ModelRef
from control.runtime.live import InitialReplica
from control.wiring.live import serving_core_config
from tests.api.conftest import ADMIN_TOKEN
from tests.support.live_gateway import live_app, live_world, started_clients

SHARED, DEEP = "fork-shared:1", "fork-deep:1"
REFS = {SHARED: ModelRef(SHARED, "generate", "tiny", "gpt2"),
        DEEP: ModelRef(DEEP, "generate", "tiny", "gpt2")}  # fmt: skip
DEVICES = ("cpu:0", "cpu:1")
URL = "/v1/workflows/fork/versions/1/runs"
SHORT_TOKENS, LONG_TOKENS = 4, 48


def _gen(node_id: str, model: str, tokens: int) -> dict[str, Any]:
    # max_tokens: what the worker generates; max_output_tokens: what the core predicts from
    params = {"max_tokens": tokens, "max_output_tokens": tokens}
    return {"id": node_id, "task": "generate", "model": model, "params": params}


FORK: dict[str, Any] = {
    "inputs": {"query": "text"},
    "outputs": {"brief": "brief.text", "act": "act.text"},
    "nodes": [
        {"id": "route", "tool": "router", "params": {"rules": [], "default": "go"}},
        _gen("brief", SHARED, SHORT_TOKENS),
        _gen("plan", SHARED, SHORT_TOKENS),
        _gen("act", DEEP, LONG_TOKENS),
    ],
    "edges": [
        {"from": "input.query", "to": "route.value"},
        {"from": "route.value", "to": "brief.prompt", "when": "go"},
        {"from": "route.value", "to": "plan.prompt", "when": "go"},
        {"from": "plan.text", "to": "act.prompt"},
    ],
}


def seed(services: Any) -> str:
    """Two CPU devices, the two models, the ``fork`` workflow and one tenant; its API key."""
    node = services.nodes.create("test", name="local")
    for name in DEVICES:
        services.devices.create("test", name=name, node_id=node.id, kind="cpu",
                                memory_mib=2048, precisions=["fp32"], is_real=True)  # fmt: skip
    for key, batch in ((SHARED, 1), (DEEP, 8)):
        name, version = key.split(":")
        services.models.create("test", name=name, version=version, task="generate",
                               weights_source="declared", weights_location="tiny test model",
                               memory_mib=16, max_batch_size=batch,
                               max_batch_tokens=8192)  # fmt: skip
    services.workflows.create("test", name="fork", version="1", spec=FORK, status="active")
    tenant = services.tenants.create("test", name="agent", weight=1).id
    return services.api_keys.create_key("test", tenant).plaintext


@asynccontextmanager
async def fork_gateway(
    root: Path, template: Path, step_order: str = "arrival"
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    """The tenant's and the admin's clients of a started gateway over the seeded fleet, the
    core ordering steps by ``step_order``; stopped on exit."""
    world = live_world(root, template, archs=("gpt2",))
    key = seed(world.services)
    core = dataclasses.replace(serving_core_config(), step_order=step_order)
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=120),
                   memory_mib=2048, core_config=core,
                   placement=[InitialReplica(SHARED, DEVICES[0]), InitialReplica(DEEP, DEVICES[1])],
                   devices=[DeviceInfo(d, "cpu", i, 2048, cpu_core=i) for i, d in enumerate(DEVICES)])  # fmt: skip
    async with started_clients(app, key) as clients:
        yield clients


async def run_once(client: httpx.AsyncClient, text: str = "plan the next step") -> dict:
    """One synchronous run; the run record (``nodes`` with each node's ``done_ms``)."""
    r = await client.post(URL, json={"inputs": {"query": text}, "mode": "sync"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "succeeded", body
    return body


async def burst(client: httpx.AsyncClient, n: int) -> list[dict]:
    """``n`` runs sent at once; their records, each with ``latency_s`` (accepted to finished,
    as the gateway recorded it)."""
    runs = await asyncio.gather(*(run_once(client, f"query {i}") for i in range(n)))
    for run in runs:
        received, finished = (_seconds(run[k]) for k in ("received_at", "finished_at"))
        run["latency_s"] = finished - received
    return list(runs)


def _seconds(stamp: str) -> float:
    from datetime import datetime  # noqa: PLC0415

    return datetime.fromisoformat(stamp).timestamp()


def plan_first_share(runs: list[dict]) -> float:
    """Share of runs whose ``plan`` (the deep branch) finished before their ``brief``."""
    first = [r for r in runs if r["nodes"]["plan"]["done_ms"] < r["nodes"]["brief"]["done_ms"]]
    return len(first) / len(runs)
