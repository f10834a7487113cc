"""What-if requests in the operator's terms (a headroom reservation as it would be saved, a
quota scale, a stored plan, a workflow version) against the demo fleet: the stored scenario
holds the twin's sections they stand for, and a change that could not be saved is refused with
the field named and nothing stored."""

from __future__ import annotations

import pytest

from control.api.twin import TwinEngine
from control.config import Settings
from control.executor.protocol import DeviceInfo
from control.services.seed import seed_demo

WORKLOAD = {"trace_name": "azure_code", "max_requests": 20}


@pytest.fixture
def demo(stack, tmp_path):
    url = str(stack.factory.kw["bind"].url)
    seed_demo(
        url, Settings(var_dir=tmp_path), local_devices=[DeviceInfo("cpu:0", "cpu", 0, 2048, 0)]
    )
    stack.app.state.gateway.whatif_engine = TwinEngine(stack.factory, url)
    return stack


async def _create(admin, variants: dict, workload: dict | None = None):
    scenario = {"baseline": "active", "workload": workload or WORKLOAD, "variants": variants}
    return await admin.post("/admin/whatif", json={"scenario": scenario})


async def _ids(admin, path: str, **params) -> dict[str, int]:
    items = (await admin.get(path, params={"limit": 1000, **params})).json()["items"]
    return {i.get("name", str(i["id"])): i["id"] for i in items}


async def test_baseline_is_the_fleet_in_force_under_the_named_trace(demo, admin):
    r = await _create(admin, {})
    assert r.status_code == 201, r.text
    base = r.json()["scenario"]["baseline"]
    assert base["workload"]["trace"] == "azure" and base["workload"]["source"].endswith(".csv")
    assert base["workload"]["tenants"] == {"acme": 3, "globex": 2, "initech": 1}
    assert set(base["workload"]["workflows"]) == {"rag:1", "agent:1"}
    assert [h["reservation_id"] for h in base["headroom"]] == ["burst-buffer"]


async def test_edited_reservation_replaces_the_stored_one_in_the_variant(demo, admin):
    rid = (await _ids(admin, "/admin/headroom"))["burst-buffer"]
    r = await _create(admin, {"edit": {"headroom_set": [{"id": rid, "reserved_milli": 300,
                                                         "allowed_classes": ["critical", "standard"]}]}})  # fmt: skip
    assert r.status_code == 201, r.text
    scenario = r.json()["scenario"]
    (before,) = scenario["baseline"]["headroom"]
    (after,) = scenario["variants"]["edit"]["headroom"]
    assert after == {**before, "reserved_milli": 300, "allowed_classes": ["critical", "standard"]}
    assert scenario["requested"]["edit"]["headroom_set"][0]["id"] == rid
    stored = (await admin.get(f"/admin/headroom/{rid}")).json()
    assert stored["reserved_milli"] == 150  # a preview changes nothing


async def test_new_reservation_is_added_with_its_pool_resolved_to_devices(demo, admin):
    new = {"name": "h100-burst", "selector": {"accelerator": "H100-80GB"}, "reserved_milli": 200,
           "allowed_classes": ["critical"], "borrowable": False}  # fmt: skip
    r = await _create(admin, {"add": {"headroom_set": [new]}})
    assert r.status_code == 201, r.text
    section = r.json()["scenario"]["variants"]["add"]["headroom"]
    assert [h["reservation_id"] for h in section] == ["burst-buffer", "h100-burst"]
    assert section[1]["device_ids"] == [f"gpu-{n}-{i}" for n in "ab" for i in range(4)]
    assert section[1]["borrowable"] is False


@pytest.mark.parametrize(
    ("knob", "value", "check"),
    [
        ("headroom_reserved_milli", 250, lambda b, v: [h["reserved_milli"] for h in v["headroom"]] == [250]),
        ("quota_scale_milli", 500, lambda b, v: [q["nominal"] // 2 for q in b["quotas"]]
         == [q["nominal"] for q in v["quotas"]]),
        ("workflow", "agent:1", lambda b, v: v["workload"]["workflows"]["agent:1"] == 1
         and any(w["workflow"] == "agent:1" for w in v["workflows"])),
    ],
)  # fmt: skip
async def test_operator_knobs_become_twin_sections(demo, admin, knob, value, check):
    r = await _create(admin, {"v": {knob: value}})
    assert r.status_code == 201, r.text
    scenario = r.json()["scenario"]
    assert check(scenario["baseline"], scenario["variants"]["v"])


async def test_plan_variant_places_the_plans_rows(demo, admin):
    plan = min((await _ids(admin, "/admin/placement-plans")).values())
    r = await _create(admin, {"p": {"plan_id": plan}})
    assert r.status_code == 201, r.text
    scenario = r.json()["scenario"]
    assert scenario["variants"]["p"]["placement"] == scenario["baseline"]["placement"]


@pytest.mark.parametrize(
    ("variants", "workload", "field"),
    [
        ({"v": {"headroom_set": [{"id": 1, "reserved_milli": 800}]}}, None, "reserved_milli"),
        ({"v": {"headroom_set": [{"id": 999, "reserved_milli": 100}]}}, None, "headroom_set[0].id"),
        (
            {
                "v": {
                    "headroom_set": [
                        {"name": "x", "reserved_milli": 100, "allowed_classes": ["critical"]}
                    ]
                }
            },
            None,
            "selector",
        ),
        ({"v": {"plan_id": 999}}, None, "plan_id"),
        ({"v": {"workflow": "rag:9"}}, None, "workflow"),
        ({"v": {"quota_scale_milli": 0}}, None, "quota_scale_milli"),
        ({}, {"trace_name": "nope"}, "trace_name"),
    ],
)
async def test_a_change_that_cannot_be_tried_is_refused_naming_its_field(
    demo, admin, variants, workload, field
):
    before = (await admin.get("/admin/whatif")).json()["total"]
    r = await _create(admin, variants, workload)
    assert r.status_code == 422, r.text
    assert field in r.json()["field"], r.json()
    assert (await admin.get("/admin/whatif")).json()["total"] == before
