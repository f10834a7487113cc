"""Workflow inputs are checked at submission (issue 22, item 2): through the real gateway, the
live runtime and a real executor with a tiny embedding model.

An integer ``text`` used to run, fail in the model twice and end in 502; a missing one waited
for an input that never came until the 60 s timeout (504). Each must be a 422 at once whose
JSON body names the field, with nothing recorded (no run listed) and nothing billed.
"""

from __future__ import annotations

import time

import pytest
import pytest_asyncio
import torch

from control.api.settings import GatewayConfig
from control.services.run_inputs import InputLimits
from tests.api.conftest import ADMIN_TOKEN, client_for
from tests.support.live_gateway import (
    TINY_EMBED_REFS,
    live_app,
    live_world,
    seed_embed_fleet,
)

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

REFS = TINY_EMBED_REFS
URL = "/v1/workflows/vec/versions/1/runs"


def _seed(services) -> int:  # noqa: ANN001
    seed_embed_fleet(services)
    return services.tenants.create("test", name="acme", weight=1).id


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("run-inputs"), _sqlite_template, ("bert",))
    services = world.services
    tenant = _seed(services)
    key = services.api_keys.create_key("test", tenant).plaintext
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=30))
    inference = app.state.gateway.inference
    await inference.start()
    client = client_for(app, key)
    yield services, client
    await client.aclose()
    await inference.stop()


async def _refused(client, inputs, field: str, mode: str = "sync") -> str:  # noqa: ANN001
    started = time.monotonic()
    r = await client.post(URL, json={"inputs": inputs, "mode": mode})
    elapsed = time.monotonic() - started
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["field"] == field and body["problems"][0]["location"] == field, body
    assert elapsed < 2.0, f"refused after {elapsed:.2f} s: the run was started"
    return body["detail"]


async def _nothing_recorded(services, client) -> None:  # noqa: ANN001
    r = await client.get("/v1/runs")
    assert r.status_code == 200 and r.json()["items"] == [], r.text
    assert services.usage.list() == []


async def test_wrong_type_missing_unknown_and_oversize_are_422_naming_the_field(live):
    services, client = live
    assert "string" in await _refused(client, {"text": 5}, "inputs.text")
    assert "missing" in await _refused(client, {}, "inputs.text", mode="async")
    assert "unknown input" in await _refused(client, {"text": "a", "txet": "b"}, "inputs.txet")
    big = "x" * (InputLimits().max_text_chars + 1)
    assert "limit" in await _refused(client, {"text": big}, "inputs.text", mode="async")
    await _nothing_recorded(services, client)


async def test_a_valid_input_still_runs(live):
    services, client = live
    r = await client.post(URL, json={"inputs": {"text": "fine"}, "mode": "sync"})
    assert r.status_code == 200 and len(r.json()["outputs"]["vector"]) == 32, r.text
