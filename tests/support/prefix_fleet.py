"""A live gateway with two replicas of one generate model on two CPU workers, for prefix-aware
routing (issue 24, item 1): the live test and ``bench/live/prefix.py`` share it.

The model is a tiny random GPT-2 with a ChatML template (``tiny/gpt2-chat``) unless the caller
names another executor reference (the benchmark's SmolLM2). ``use_prefix=False`` builds the
same gateway with the routing policy's prefix term off (hashes are still sent; the core just
does not route by them): the "no prefix routing" baseline.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from control.api.settings import GatewayConfig
from control.commands.profile import _store as store_profile
from control.core.routing.predicted_completion import PredictedCompletionConfig
from control.executor import sources
from control.executor.protocol import DeviceInfo, ModelRef
from control.runtime.live import InitialReplica
from control.wiring.live import serving_core_config
from tests.api.conftest import ADMIN_TOKEN
from tests.app.stack import Served, serve_in_thread
from tests.support.live_gateway import live_app, live_world

MODEL = "chat-model"
KEY = f"{MODEL}:1"
DEVICES = ("cpu:0", "cpu:1")
TINY_CHAT = ModelRef(KEY, "generate", "tiny", "gpt2-chat")


@dataclass
class PrefixFleet:
    served: Served
    url: str
    key: str  # the tenant's API key
    ref: ModelRef
    cache: Path  # the models' folder

    def stop(self) -> None:
        self.served.stop()


def start_fleet(
    root: Path, template: Path, *, ref: ModelRef = TINY_CHAT, block_tokens: int = 16,
    use_prefix: bool = True, cache: Path | None = None, timeout_s: float = 60.0,
    prefix_capacity_blocks: int = 4096, profile_rows: Sequence[Any] = (),
) -> PrefixFleet:  # fmt: skip
    """Seed (two CPU devices, the model, one tenant) and serve; returns once it listens.
    ``cache``: where the models are (default a fresh folder under ``root``);
    ``prefix_capacity_blocks``: what the core assumes each replica's KV cache holds;
    ``profile_rows``: the model's measured latency rows (``legato profile``'s), stored as that
    command stores them, so the core predicts prefill times (and a hit's saving) from them."""
    world = live_world(root, template, archs=())
    if cache is not None:
        world = dataclasses.replace(world, cache=cache)
    if ref.source == "tiny":
        sources.ensure_tiny(ref.path or "gpt2", world.cache)
    s = world.services
    node = s.nodes.create("test", name="local")
    for name in DEVICES:
        s.devices.create("test", name=name, node_id=node.id, kind="cpu", memory_mib=4096,
                         precisions=["fp32"], is_real=True)  # fmt: skip
    model = s.models.create("test", name=MODEL, version="1", task="generate",
                            weights_source="declared", weights_location="test model",
                            memory_mib=600, max_batch_size=8, max_batch_tokens=8192)  # fmt: skip
    if profile_rows:
        store_profile(s, model.id, profile_rows)
    tenant = s.tenants.create("test", name="t", weight=1, priority_class="standard")
    key = s.api_keys.create_key("test", tenant.id).plaintext
    routing = PredictedCompletionConfig(use_prefix=use_prefix)
    core = dataclasses.replace(serving_core_config(), prefix_block_tokens=block_tokens,
                               routing_config=routing,
                               prefix_capacity_blocks=prefix_capacity_blocks)  # fmt: skip
    config = GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=timeout_s)
    app = live_app(world, {KEY: ref}, config, memory_mib=4096,
                   placement=[InitialReplica(KEY, d) for d in DEVICES],
                   devices=[DeviceInfo(d, "cpu", i, 4096, cpu_core=i) for i, d in enumerate(DEVICES)],
                   start_with_app=True, core_config=core)  # fmt: skip
    served = serve_in_thread(app, start_timeout_s=120)  # two workers start on shared cores
    return PrefixFleet(served, served.url, key, ref, world.cache)


async def chat(
    client: httpx.AsyncClient, key: str, system: str, user: str, max_tokens: int
) -> dict[str, Any]:
    """One chat completion (greedy); returns the run record (``GET /v1/runs``) with the
    answer's usage under ``"chat_usage"``."""
    headers = {"Authorization": f"Bearer {key}"}
    body = {"model": MODEL, "max_tokens": max_tokens, "temperature": 0,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}  # fmt: skip
    r = await client.post("/v1/chat/completions", json=body, headers=headers)
    r.raise_for_status()
    answer = r.json()
    run_id = answer["id"].removeprefix("chatcmpl-")
    run = (await client.get(f"/v1/runs/{run_id}", headers=headers)).json()
    return {**run, "chat_usage": answer["usage"]}


def metric(text: str, name: str, model: str = KEY) -> float:
    """The value of the sample ``name{model="..."}`` in a /metrics body (0 when absent)."""
    prefix = f'{name}{{model="{model}"}} '
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line[len(prefix) :])
    return 0.0
