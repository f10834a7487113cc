"""What-if variants of tenancy as it would be saved (``quota_set``, ``tenant_set``) against the
demo fleet: the stored variant holds the core's quota and tenant sections the change stands for,
a change that could not be saved is refused naming its field, and a preview changes nothing."""

from __future__ import annotations

import pytest

from control.api.twin import TwinEngine
from control.config import Settings
from control.executor.protocol import DeviceInfo
from control.services.seed import seed_demo
from tests.api.test_whatif_variants import _create, _ids


@pytest.fixture
def demo(stack, tmp_path):
    """The demo fleet behind the shared app, with the twin's what-if engine."""
    url = str(stack.factory.kw["bind"].url)
    seed_demo(
        url, Settings(var_dir=tmp_path), local_devices=[DeviceInfo("cpu:0", "cpu", 0, 2048, 0)]
    )
    stack.app.state.gateway.whatif_engine = TwinEngine(stack.factory, url)
    return stack


async def _quota(admin, tenant: str) -> dict:
    tenants = await _ids(admin, "/admin/tenants")
    found = await admin.get("/admin/quotas", params={"tenant_id": tenants[tenant]})
    return found.json()["items"][0]


async def test_quota_create_edit_and_delete_become_the_variants_quota_section(demo, admin):
    tenants = await _ids(admin, "/admin/tenants")
    acme = (await admin.get("/admin/quotas", params={"tenant_id": tenants["acme"]})).json()["items"]
    edit, gone = acme[0], acme[1]
    changes = [{"tenant_id": tenants["acme"], "resource": "token_burst", "nominal": 500},
               {"id": edit["id"], "nominal": 7, "borrowing_limit": 0},
               {"id": gone["id"], "delete": True}]  # fmt: skip
    r = await _create(admin, {"q": {"quota_set": changes}})
    assert r.status_code == 201, r.text
    scenario = r.json()["scenario"]
    base = {(q["tenant_id"], q["resource"]): q for q in scenario["baseline"]["quotas"]}
    after = {(q["tenant_id"], q["resource"]): q for q in scenario["variants"]["q"]["quotas"]}
    assert after[("acme", "token_burst")]["nominal"] == 500
    assert ("acme", "token_burst") not in base
    changed = after[("acme", edit["resource"])]
    assert (changed["nominal"], changed["borrowing_limit"]) == (7, 0)
    assert changed["period_s"] == edit["period_s"]
    assert ("acme", gone["resource"]) in base and ("acme", gone["resource"]) not in after
    assert set(after) - {("acme", "token_burst")} == set(base) - {("acme", gone["resource"])}
    assert (await admin.get(f"/admin/quotas/{edit['id']}")).json()["nominal"] == edit["nominal"]


async def test_tenant_weight_class_and_cohort_change_become_the_variants_tenants(demo, admin):
    tenants = await _ids(admin, "/admin/tenants")
    made = await admin.post("/admin/cohorts", json={"name": "research"})
    assert made.status_code == 201, made.text
    change = {"id": tenants["globex"], "weight": 9, "priority_class": "batch",
              "cohort_id": made.json()["id"]}  # fmt: skip
    r = await _create(admin, {"t": {"tenant_set": [change]}})
    assert r.status_code == 201, r.text
    after = {t["tenant_id"]: t for t in r.json()["scenario"]["variants"]["t"]["tenants"]}
    base = {t["tenant_id"]: t for t in r.json()["scenario"]["baseline"]["tenants"]}
    assert after["globex"] == {**base["globex"], "weight": 9, "priority_class": "batch",
                               "cohort": "research"}  # fmt: skip
    assert after["acme"] == base["acme"]
    assert (await admin.get(f"/admin/tenants/{tenants['globex']}")).json()["weight"] == 2


async def test_unsavable_tenancy_changes_are_refused_naming_the_field(demo, admin):
    tenants = await _ids(admin, "/admin/tenants")
    existing = await _quota(admin, "acme")
    runs = (await admin.get("/admin/whatif")).json()["total"]
    cases = [
        ({"quota_set": [{"id": existing["id"], "nominal": -1}]}, "quota_set[0].nominal"),
        (
            {
                "quota_set": [
                    {"tenant_id": tenants["acme"], "resource": existing["resource"], "nominal": 5}
                ]
            },
            "quota_set[0].resource",
        ),  # fmt: skip
        (
            {"quota_set": [{"tenant_id": tenants["acme"], "resource": "gpus", "nominal": 5}]},
            "quota_set[0].resource",
        ),
        ({"quota_set": [{"id": 999_999, "delete": True}]}, "quota_set[0].id"),
        ({"tenant_set": [{"id": tenants["acme"], "weight": 0}]}, "tenant_set[0].weight"),
        (
            {"tenant_set": [{"id": tenants["acme"], "cohort_id": 999_999}]},
            "tenant_set[0].cohort_id",
        ),
    ]
    for variant, field in cases:
        r = await _create(admin, {"v": variant})
        assert r.status_code == 422, (variant, r.text)
        assert r.json()["field"] == f"scenario.variants.v.{field}", r.json()
    assert (await admin.get("/admin/whatif")).json()["total"] == runs
