"""Precision variants through the real gateway, the live runtime and real CPU workers (issue 27).

The tiny embedder ``tiny-embed:1`` runs on ``cpu:0``; its int8 variant (``tiny-embed:1@int8``,
measured quality 0.93, 5 MiB against the base's 16) on ``cpu:1``; a bf16 variant (0.995) is
registered but has no replica. One workflow names only the base. A ``fast`` run is served by
the int8 replica, an ``exact`` run by the base, a ``balanced`` run prefers bf16, finds no
replica and is upgraded to the base, which its run record says. The ledger names the variant
that ran and prices it by memory (no cost weight of its own: the base's x 5/16).

Until the executor's precision loading (issue 27, "prec") is merged the worker loads the int8
variant's weights as they are: what is tested here is the core's choice, the record and the bill.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
import pytest_asyncio
import torch

from control.api.settings import GatewayConfig
from control.executor.protocol import DeviceInfo
from control.runtime.live import InitialReplica
from db import models as m
from db.session import session_scope
from tests.api.conftest import ADMIN_TOKEN, client_for
from tests.support.live_gateway import TINY_EMBED_REFS, live_app, live_world, seed_embed_fleet

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

BASE = "tiny-embed:1"
INT8, BF16 = f"{BASE}@int8", f"{BASE}@bf16"
REF = TINY_EMBED_REFS[BASE]
REFS = {BASE: REF, INT8: replace(REF, name=INT8, precision="int8"),
        BF16: replace(REF, name=BF16, precision="bf16")}  # fmt: skip
TEXT = "a sentence long enough to cost a few tokens of work"


def _seed(services) -> None:  # noqa: ANN001
    seed_embed_fleet(services)
    node = services.nodes.list(name="local")[0]
    services.devices.create("test", name="cpu:1", node_id=node.id, kind="cpu", memory_mib=2048,
                            precisions=["fp32", "int8", "bf16"], is_real=True)  # fmt: skip
    (model,) = services.models.list(name="tiny-embed")
    services.models.update("test", model.id, cost_weight_milli=1600)
    with session_scope(services.factory) as session:
        session.add(m.ModelVariant(model_id=model.id, precision="int8", memory_mib=5,
                                   quality={"metric": "cosine", "score": 0.93}))  # fmt: skip
        session.add(m.ModelVariant(model_id=model.id, precision="bf16", memory_mib=8,
                                   quality={"metric": "cosine", "score": 0.995}))  # fmt: skip


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("variants"), _sqlite_template, ("bert",))
    _seed(world.services)
    tenant = world.services.tenants.create("test", name="acme", weight=1).id
    key = world.services.api_keys.create_key("test", tenant).plaintext
    cpus = [DeviceInfo(f"cpu:{i}", "cpu", i, 1024, 0) for i in (0, 1)]
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=30),
                   devices=cpus, placement=[InitialReplica(BASE, "cpu:0"),
                                            InitialReplica(INT8, "cpu:1")])  # fmt: skip
    inference = app.state.gateway.inference
    await inference.start()
    client, admin = client_for(app, key), client_for(app, ADMIN_TOKEN)
    try:
        yield client, admin, tenant
    finally:
        await client.aclose()
        await admin.aclose()
        await inference.stop()


async def _run(client, quality: str) -> dict:  # noqa: ANN001
    r = await client.post("/v1/workflows/vec/versions/1/runs",
                          json={"inputs": {"text": TEXT}, "mode": "sync", "quality": quality})  # fmt: skip
    assert r.status_code == 200, r.text
    got = await client.get(f"/v1/runs/{r.json()['id']}")
    assert got.status_code == 200, got.text
    return got.json()


async def _ledger(client, run_id: str) -> dict:  # noqa: ANN001
    r = await client.get("/v1/usage", params={"request_id": run_id})
    assert r.status_code == 200, r.text
    (entry,) = r.json()["items"]
    return entry


async def test_fast_and_exact_runs_name_and_bill_the_variant_that_ran(live):
    client, _, _ = live
    fast, exact = await _run(client, "fast"), await _run(client, "exact")
    assert fast["status"] == exact["status"] == "succeeded"
    assert (fast["quality"], exact["quality"]) == ("fast", "exact")
    assert fast["nodes"]["embed"]["model"] == INT8 and exact["nodes"]["embed"]["model"] == BASE
    assert fast["degradations"] is None and exact["degradations"] is None
    fast_bill, exact_bill = await _ledger(client, fast["id"]), await _ledger(client, exact["id"])
    assert (fast_bill["variant"], exact_bill["variant"]) == ("int8", None)
    assert fast_bill["model_id"] == exact_bill["model_id"]  # the base's, the variant apart
    assert fast_bill["input_tokens"] == exact_bill["input_tokens"]
    assert 0 < fast_bill["cost_units"] < exact_bill["cost_units"]


async def test_a_balanced_run_without_its_variant_placed_is_upgraded_and_says_so(live):
    client, _, _ = live
    run = await _run(client, "balanced")
    assert run["status"] == "succeeded" and run["nodes"]["embed"]["model"] == BASE
    (note,) = run["degradations"]
    assert (note["node"], note["wanted"], note["ran"], note["kind"]) == (
        "embed", BF16, BASE, "upgrade")  # fmt: skip
    assert "no replica" in note["reason"]
    assert (await _ledger(client, run["id"]))["variant"] is None


async def test_a_bad_quality_is_refused_naming_the_field(live):
    client, _, _ = live
    r = await client.post("/v1/workflows/vec/versions/1/runs",
                          json={"inputs": {"text": TEXT}, "quality": "perfect"})  # fmt: skip
    assert r.status_code == 422 and "quality" in r.text
