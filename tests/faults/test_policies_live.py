"""Live policy settings (issue 24, item 9): ``GET``/``PATCH /admin/policies`` on the real
gateway with a real worker and the tiny embedder. A change reaches the running core at once
(a lone request waits out a long batching delay set by PATCH, and no longer once it is set
back), is audited with before and after, and a bad one is a 422 naming the field (an unknown
strategy lists the known ones) that changes nothing."""

from __future__ import annotations

import time

import pytest
import pytest_asyncio
import torch

from tests.support.live_gateway import embed_clients, live_world, seed_embed_fleet

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]
URL = "/v1/workflows/vec/versions/1/runs"
DELAY_S = 0.4


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("policies"), _sqlite_template, ("bert",))
    seed_embed_fleet(world.services)
    async with embed_clients(world) as clients:
        yield clients


async def _run_s(client) -> float:  # noqa: ANN001
    started = time.monotonic()
    r = await client.post(URL, json={"inputs": {"text": "hello"}, "mode": "sync"})
    assert r.status_code == 200, r.text
    return time.monotonic() - started


async def test_policies_are_shown_with_the_known_strategies(live):
    client, admin = live
    r = await admin.get("/admin/policies")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["policies"]["batching"] == "queue_building"
    assert body["policies"]["fair_share"] == "vtc"
    assert {s["name"] for s in body["strategies"]["fair_share"]} == {"vtc", "fcfs", "rate_limit"}
    assert "request_ids_kept_s" in body["fixed_at_start"] and "binding" in body["live_fields"]
    assert (await client.get("/admin/policies")).status_code == 403


async def test_a_batching_delay_set_live_applies_to_the_next_request_and_is_audited(live):
    client, admin = live
    await _run_s(client)  # warm
    change = {"batching": "size_delay", "batching_config": {"max_queue_delay_s": DELAY_S}}
    r = await admin.patch("/admin/policies", json=change)
    assert r.status_code == 200, r.text
    assert r.json()["policies"]["batching_config"] == {"max_queue_delay_s": DELAY_S}
    assert await _run_s(client) >= DELAY_S  # a lone request now waits for company
    r = await admin.patch("/admin/policies", json={"batching_config": {"max_queue_delay_s": 0}})
    assert r.status_code == 200, r.text
    assert min([await _run_s(client) for _ in range(3)]) < DELAY_S
    audit = (await admin.get("/admin/audit", params={"entity_type": "core_policies"})).json()
    first = audit["items"][-1]
    assert first["actor"] == "admin" and first["action"] == "update"
    assert first["before"]["batching"] == "queue_building"
    assert first["after"]["batching_config"] == {"max_queue_delay_s": DELAY_S}


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"batching": "nope"}, "batching", "known: adaptive, queue_building, size_delay"),
        ({"fair_share": "lottery"}, "fair_share", "known: fcfs, rate_limit, vtc"),
        ({"routing": "random"}, "routing", "known: predicted_completion"),
        ({"finished_runs_kept": 3}, "finished_runs_kept", "fixed at start"),
        ({"binding": {"dispatch_ahead_us": -1}}, "binding.dispatch_ahead_us", ">= 0"),
        ({"delay": 1}, "delay", "unknown field"),
        ({"transfer": {"other_node_mb_per_s": -1}}, "transfer.other_node_mb_per_s", ">= 0"),
    ],
)
async def test_a_bad_change_is_a_422_naming_the_field_and_changes_nothing(
    live, change, field, says
):
    _, admin = live
    before = (await admin.get("/admin/policies")).json()
    r = await admin.patch("/admin/policies", json=change)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and says in r.json()["detail"], r.json()
    assert (await admin.get("/admin/policies")).json() == before


async def test_the_fair_share_policy_changes_live(live):
    client, admin = live
    r = await admin.patch("/admin/policies", json={"fair_share": "fcfs"})
    assert r.status_code == 200 and r.json()["policies"]["fair_share"] == "fcfs", r.text
    await _run_s(client)  # the core serves on under the new policy
    r = await admin.patch("/admin/policies", json={"fair_share": "rate_limit",
                                                   "fair_share_config": {}})  # fmt: skip
    assert r.status_code == 200 and r.json()["policies"]["fair_share"] == "rate_limit", r.text


async def test_transfer_bandwidths_change_live(live):
    """Per-tier latency and bandwidth are live fields: the running core takes them."""
    _client, admin = live
    change = {"transfer": {"other_node_us": 5, "other_node_mb_per_s": 50_000,
                           "same_group_mb_per_s": 450_000}}  # fmt: skip
    r = await admin.patch("/admin/policies", json=change)
    assert r.status_code == 200, r.text
    shown = (await admin.get("/admin/policies")).json()["policies"]["transfer"]
    assert shown["other_node_mb_per_s"] == 50_000 and shown["other_node_us"] == 5
    assert shown["same_group_mb_per_s"] == 450_000 and shown["vector_bytes"] == 1_536
