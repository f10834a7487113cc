"""Schemathesis deeper than ``test_schema.py``: the same routes (every one but those needing
the live runtime) with their path parameters set to records that exist (so PATCH, DELETE,
submit, revoke, activate and cancel reach the service instead of a 404), in positive mode and
in negative mode (bad bodies, bad query strings, bad path values), with each route's
credential. Every answer must be a non-5xx; positive cases are also checked against the
document. Bounded: a few examples per operation and mode (well under a minute in all).

Left out of negative mode: the routes without parameters (``/healthz``, ``/readyz``,
``/metrics``), for which no invalid request exists to generate.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from schemathesis.generation import GenerationMode

from control.store.adapters import LoraAdapterRepository
from tests.api.conftest import ADMIN_TOKEN
from tests.api.test_schema import CHECKS, api  # noqa: F401 - the module's fixture

SPEC = {
    "inputs": {"text": "text"},
    "outputs": {"vector": "embed.embedding"},
    "nodes": [{"id": "embed", "task": "embed", "model": "e:1"}],
    "edges": [{"from": "input.text", "to": "embed.text"}],
}


def _seed_admin(client: TestClient, services) -> dict[str, object]:  # noqa: ANN001
    """One record of each admin resource, keyed by its path segment."""

    def post(path: str, body: dict) -> int:
        r = client.post(path, json=body)
        assert r.status_code == 201, (path, r.text)
        return r.json()["id"]

    ids: dict[str, object] = {"nodes": post("/admin/nodes", {"name": "n2"})}
    ids["devices"] = post("/admin/devices", {"name": "cpu:9", "node_id": ids["nodes"],
                                             "kind": "cpu", "memory_mib": 1024})  # fmt: skip
    ids["models"] = services.models.create("seed", name="e", version="1", task="embed",
        weights_source="declared", weights_location="x", memory_mib=16).id  # fmt: skip
    ids["latency-profiles"] = post("/admin/latency-profiles", {"model_id": ids["models"],
        "device_type": "cpu", "batch_size": 1, "num_tokens": 16, "latency_us": 14000})  # fmt: skip
    ids["placement-plans"] = post("/admin/placement-plans", {"note": "try"})
    ids["placements"] = post("/admin/placements", {"plan_id": ids["placement-plans"],
        "model_id": ids["models"], "device_ids": [ids["devices"]]})  # fmt: skip
    ids["workflows"] = services.workflows.create("seed", name="w", version="1", spec=SPEC,
                                                 status="active").id  # fmt: skip
    ids["cohorts"] = post("/admin/cohorts", {"name": "research"})
    ids["tenants"] = post("/admin/tenants", {"name": "globex", "weight": 2})
    ids["keys"] = client.post(f"/admin/tenants/{ids['tenants']}/keys", json={}).json()["id"]
    ids["quotas"] = post("/admin/quotas", {"tenant_id": ids["tenants"],
                                           "resource": "tokens_per_min", "nominal": 6000})  # fmt: skip
    ids["headroom"] = post("/admin/headroom", {"name": "burst", "selector": {"labels": {}},
        "reserved_milli": 150, "allowed_classes": ["critical"]})  # fmt: skip
    ids["whatif"] = post("/admin/whatif", {"scenario": {"variants": {}}})
    return ids


@pytest.fixture(scope="module")
def seeded(api, tmp_path_factory):  # noqa: F811
    schema, tenant_key = api
    services = schema.app.state.gateway.services
    client = TestClient(schema.app, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    ids = _seed_admin(client, services)
    acme = services.api_keys.verify_key(tenant_key).tenant_id
    # the tenant's own run (GET/cancel/events as the tenant), the admin's (any tenant's)
    run = services.requests.create("seed", tenant_id=acme, workflow_name="w",
                                   workflow_version="1", body_hash="h").id  # fmt: skip
    ids["requests"] = run
    # an adapter row as written straight to the database (its folder is not read by the routes)
    with services.factory.begin() as session:
        ids["adapters"] = (
            LoraAdapterRepository(session)
            .add(tenant_id=acme, model_id=ids["models"], name="support", path="/nowhere", rank=4)
            .id
        )
    root = tmp_path_factory.mktemp("traces")
    (root / "t.csv").write_text("a,b\n")
    services.traces.confine_to([root])
    ids["traces"] = services.traces.create("seed", name="tr", format="synthetic",
                                           path=str(root / "t.csv"), num_rows=1).id  # fmt: skip
    return schema, tenant_key, ids


def _path_parameters(path: str, ids: dict[str, object]) -> dict[str, object]:
    parts = path.split("/")
    found: dict[str, object] = {}
    if "{item_id}" in parts:
        found["item_id"] = ids[parts[2]]
    if "{run_id}" in parts:
        found["run_id"] = ids["requests"]
    return found


def _fuzz(operation, mode: GenerationMode, headers: dict[str, str], params: dict):
    chosen = CHECKS if mode is GenerationMode.POSITIVE else [checks.not_a_server_error]

    @settings(max_examples=5, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(operation.as_strategy(generation_mode=mode, path_parameters=params))
    def check(case) -> None:
        case.call_and_validate(headers=headers, checks=chosen)

    return check


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_existing_records_and_bad_requests_give_no_server_errors(seeded, mode):
    schema, tenant_key, ids = seeded
    failures: list[str] = []
    count = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        params = _path_parameters(operation.path, ids)
        if mode is GenerationMode.NEGATIVE and not (params or operation.definition.raw.get(
                "parameters") or operation.body):  # fmt: skip
            continue  # nothing to make invalid
        token = ADMIN_TOKEN if operation.path.startswith("/admin") else tenant_key
        try:
            _fuzz(operation, mode, {"Authorization": f"Bearer {token}"}, params)()
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}"[:2000])
        count += 1
    assert count >= 40
    assert not failures, "\n\n".join(failures)
