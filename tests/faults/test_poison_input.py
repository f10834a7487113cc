"""Fault: one tenant's poison input while another tenant's load runs (issue 22, item 2).

A real gateway over HTTP (uvicorn on a loopback port, the real app, core, live runtime and a
real executor with one CPU worker and tiny real models). Tenant ``alice`` sends inputs the model
cannot take while tenant ``bob`` sends a concurrent load of normal calls to the same replicas,
so that their items share batches:

* embeddings of a text with a lone surrogate (``"\\ud800"`` in the JSON): it passes every
  schema and used to make the tokenizer raise for the whole batch. An edge that refuses such
  text before it runs answers 422 for it just as well; the executor's own isolation is what
  the second kind tests, and ``tests/executor/test_bad_input.py`` tests it for this one;
* completions whose prompt is longer than the model's context (the tiny GPT-2 has 512
  positions). No edge can know it is bad: only the model's tokenizer and context do. It used
  to raise inside the forward pass for every row of the decode loop.

Expected: bob has 0 failures; each of alice's calls is a 422 whose JSON body names the field
(``input``, ``prompt``) and says why; no replica's breaker opens (bad input never counts
toward it). Before the fix bob's calls failed with 502s and the breaker opened.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading

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

REFS = {
    "tiny-embed:1": ModelRef("tiny-embed:1", "embed", "tiny", "bert"),
    "tiny-gen:1": ModelRef("tiny-gen:1", "generate", "tiny", "gpt2"),
}
LONE = "why \ud800 not"  # a lone surrogate: valid JSON (``\ud800``), not valid Unicode text
TOO_LONG = "word " * 700  # over the tiny GPT-2's 512 positions
TIMEOUT_S = 30.0


def _seed(services) -> dict[str, str]:  # noqa: ANN001
    node = services.nodes.create("test", name="local")
    services.devices.create("test", name="cpu:0", node_id=node.id, kind="cpu", memory_mib=2048,
                            precisions=["fp32"], is_real=True)  # fmt: skip
    for key, ref in REFS.items():
        name, version = key.split(":")
        services.models.create("test", name=name, version=version, task=ref.task,
                               weights_source="declared", weights_location="tiny test model",
                               memory_mib=16, max_batch_size=8, max_batch_tokens=8192)  # fmt: skip
    keys = {}
    for name in ("alice", "bob"):
        tenant = services.tenants.create("test", name=name, weight=1)
        keys[name] = services.api_keys.create_key("test", tenant.id).plaintext
    return keys


@pytest.fixture(scope="module")
def gateway(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("poison"), _sqlite_template)
    keys = _seed(world.services)
    placement = [InitialReplica(key, "cpu:0") for key in REFS]
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=TIMEOUT_S),
                   memory_mib=2048, placement=placement, start_with_app=True)  # fmt: skip
    served = serve_in_thread(app)
    yield served.url, keys, app.state.gateway.inference.runtime.executor
    served.stop()


async def _post(client: httpx.AsyncClient, key: str, route: str, body: dict) -> httpx.Response:
    # Encoded here: ``json.dumps`` escapes the surrogate as ``\ud800`` (what a client sends);
    # an HTTP client encoding the body as UTF-8 itself could not send it at all.
    return await client.post(route, content=json.dumps(body).encode(),
                             headers={"Authorization": f"Bearer {key}",
                                      "Content-Type": "application/json"})  # fmt: skip


def _embed(text: str) -> tuple[str, dict]:
    return "/v1/embeddings", {"model": "tiny-embed", "input": text}


def _complete(prompt: str) -> tuple[str, dict]:
    return "/v1/completions", {"model": "tiny-gen", "prompt": prompt, "max_tokens": 3}


async def _burst(url: str, keys: dict[str, str], calls: list[tuple[str, str, dict]]) -> list:
    """Every call at once (so their items meet in batches); their responses, in order."""
    limits = httpx.Limits(max_connections=len(calls))
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT_S + 10, limits=limits) as client:
        # the models are warm before the burst: their first batch is no different from others
        warm = [_post(client, keys["bob"], *_embed("warm")),
                _post(client, keys["bob"], *_complete("warm"))]  # fmt: skip
        assert [r.status_code for r in await asyncio.gather(*warm)] == [200, 200]
        return await asyncio.gather(*(_post(client, keys[who], *call) for who, *call in calls))


def test_one_tenants_poison_input_fails_only_its_own_calls(gateway, caplog):
    url, keys, executor = gateway
    calls: list[tuple[str, str, dict]] = []
    for i in range(48):  # bob: 36 embeddings and 12 completions, alice's poison among them
        calls.append(("bob", *(_embed(f"normal text {i}") if i % 4 else _complete(f"hi {i}"))))
        if i % 4 == 1:
            calls.append(("alice", *(_embed(LONE) if i % 8 == 1 else _complete(TOO_LONG))))
    caplog.set_level(logging.WARNING, logger="control.runtime.completions")
    responses = asyncio.run(_burst(url, keys, calls))
    pairs = list(zip(calls, responses, strict=True))
    bob = [(r.status_code, r.text[:200]) for (who, *_), r in pairs if who == "bob"]
    failed = [b for b in bob if b[0] != 200]
    assert not failed, f"{len(failed)} of bob's {len(bob)} calls failed: {failed[:5]}"
    alice = [(call, r) for call, r in pairs if call[0] == "alice"]
    assert len(alice) == 12
    for (_, route, _), r in alice:
        assert r.status_code == 422, (route, r.status_code, r.text[:300])
        body = r.json()
        if route == "/v1/embeddings":  # the executor names ``input``; an edge may say more
            assert "input" in (body.get("field") or ""), body
        else:  # only the model knows this one: the executor's answer
            assert body["field"] == "prompt" and body["error"] == "bad_input", body
            assert "at most 512" in body["detail"], body
    breakers = [m for m in caplog.messages if m.startswith("breaker of")]
    assert not breakers, breakers
    # the replicas as the workers last reported them (a busy CI machine may be between beats)
    replicas = _reported_replicas(executor, expected=2)
    assert len(replicas) == 2, replicas
    assert {executor.breaker_state(rep) for rep in replicas} == {"closed"}


def _reported_replicas(executor, expected: int, tries: int = 100) -> list[str]:  # noqa: ANN001
    """The replica ids the workers' heartbeats report, asking up to ``tries`` times 0.1 s
    apart until ``expected`` of them are reported."""
    pause = threading.Event()
    for _ in range(tries):
        replicas = [rep for status in executor.heartbeat() for rep in status.replicas]
        if len(replicas) >= expected:
            break
        pause.wait(0.1)
    return replicas
