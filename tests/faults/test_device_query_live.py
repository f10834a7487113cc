"""Devices by free memory and load, read from the live core (issue 24, item 10): through the
real gateway with a real worker holding the tiny embedder (16 MiB of the device)."""

from __future__ import annotations

import pytest
import pytest_asyncio
import torch

from control.api.settings import GatewayConfig
from tests.api.conftest import ADMIN_TOKEN, client_for
from tests.support.live_gateway import TINY_EMBED_REFS, live_app, live_world, seed_embed_fleet

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def admin(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("device-query"), _sqlite_template, ("bert",))
    seed_embed_fleet(world.services)
    app = live_app(world, TINY_EMBED_REFS, GatewayConfig(admin_token=ADMIN_TOKEN))
    inference = app.state.gateway.inference
    await inference.start()
    client = client_for(app, ADMIN_TOKEN)
    yield client
    await client.aclose()
    await inference.stop()


async def _names(admin, **params) -> list[str]:  # noqa: ANN001
    r = await admin.get("/admin/devices", params=params)
    assert r.status_code == 200, r.text
    return [d["name"] for d in r.json()["items"]]


async def test_free_memory_and_load_come_from_the_live_core(admin):
    listed = (await admin.get("/admin/devices")).json()["items"]
    device = next(d for d in listed if d["name"] == "cpu:0")
    # the replica holds the model's 16 MiB (at least) of the device's memory
    assert device["free_mib"] is not None, device
    assert device["free_mib"] <= device["memory_mib"] - 16, device
    assert device["load"] == 0
    assert await _names(admin, min_free_mib=device["free_mib"]) == ["cpu:0"]
    assert await _names(admin, min_free_mib=device["free_mib"] + 1) == []
    assert await _names(admin, max_load=0, precision="fp32") == ["cpu:0"]
