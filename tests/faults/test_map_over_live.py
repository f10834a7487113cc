"""``map_over`` through the real gateway, the live runtime and a real worker with a tiny
embedder (issue 24, item 10).

A map node whose source split into ONE chunk failed (``output unavailable: no worker holds
output r5/emb``): its lone chunk is stored as ``emb#0`` while the workflow output asked for
``emb``. Several chunks worked. And ``map_over`` on a workflow input was accepted at creation
and failed at run time; it is now refused at creation, located at the node's ``map_over``.
"""

from __future__ import annotations

import pytest
import pytest_asyncio
import torch

from tests.support.live_gateway import embed_clients, live_world, seed_embed_fleet

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

MAPPED = {
    "inputs": {"doc": "text"},
    "outputs": {"vectors": "emb.embedding"},
    "nodes": [{"id": "split", "tool": "segment", "params": {"max_chars": 40}},
              {"id": "emb", "task": "embed", "model": "tiny-embed:1", "map_over": "text"}],
    "edges": [{"from": "input.doc", "to": "split.text"},
              {"from": "split.segments", "to": "emb.text"}],
}  # fmt: skip
OVER_INPUT = {
    "inputs": {"doc": "text"},
    "outputs": {"vectors": "emb.embedding"},
    "nodes": [{"id": "emb", "task": "embed", "model": "tiny-embed:1", "map_over": "text"}],
    "edges": [{"from": "input.doc", "to": "emb.text"}],
}  # fmt: skip
URL = "/v1/workflows/mapped/versions/1/runs"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("map-over"), _sqlite_template, ("bert",))
    seed_embed_fleet(world.services)
    world.services.workflows.create(
        "test", name="mapped", version="1", spec=MAPPED, status="active"
    )
    async with embed_clients(world) as clients:
        yield clients


async def test_a_map_node_with_one_chunk_succeeds(live):
    client, _ = live
    r = await client.post(URL, json={"inputs": {"doc": "One short sentence."}, "mode": "sync"})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "succeeded" and len(r.json()["outputs"]["vectors"]) == 32


async def test_a_map_node_with_several_chunks_gives_one_vector_each(live):
    client, _ = live
    doc = "The first sentence is here. The second one follows it. And a third closes."
    r = await client.post(URL, json={"inputs": {"doc": doc}, "mode": "sync"})
    assert r.status_code == 200, r.text
    vectors = r.json()["outputs"]["vectors"]
    assert len(vectors) == 3 and all(len(v) == 32 for v in vectors)


async def test_map_over_a_workflow_input_is_refused_at_creation(live):
    _, admin = live
    body = {"name": "over-input", "version": "1", "spec": OVER_INPUT, "status": "active"}
    r = await admin.post("/admin/workflows", json=body)
    assert r.status_code == 422, r.text
    problems = r.json()["problems"]
    assert [p["location"] for p in problems] == ["nodes[emb].map_over"], problems
    assert "input.doc" in problems[0]["message"]
    listed = await admin.get("/admin/workflows", params={"name": "over-input"})
    assert listed.json()["total"] == 0
