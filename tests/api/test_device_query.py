"""Admin lists refuse an unknown filter (a 422 naming it and the known ones; it used to be
ignored and the whole list came back), and devices are found by precision; the live filters
(free memory, load) need the live runtime: a 409 naming the filter on a gateway without one
(issue 24, item 10). The live values themselves: tests/faults/test_device_query_live.py."""

from __future__ import annotations

import pytest


async def _devices(admin) -> None:
    node = (await admin.post("/admin/nodes", json={"name": "n"})).json()["id"]
    for name, precisions in (("cpu:0", ["fp32"]), ("gpu:0", ["fp16", "bf16"])):
        r = await admin.post("/admin/devices", json={
            "name": name, "node_id": node, "kind": "cpu", "memory_mib": 1024,
            "precisions": precisions})  # fmt: skip
        assert r.status_code == 201, r.text


@pytest.mark.parametrize("path", ["/admin/devices", "/admin/tenants", "/admin/models"])
async def test_an_unknown_filter_is_a_422_naming_it_and_the_known_ones(admin, path) -> None:
    r = await admin.get(path, params={"stauts": "up"})
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "unknown_filter" and body["field"] == "query.stauts"
    assert "'stauts'" in body["detail"] and "status" in body["detail"]
    assert "limit" in body["detail"]  # pagination is known too


async def test_devices_by_precision(admin) -> None:
    await _devices(admin)
    r = await admin.get("/admin/devices", params={"precision": "fp16"})
    assert r.status_code == 200, r.text
    assert [d["name"] for d in r.json()["items"]] == ["gpu:0"] and r.json()["total"] == 1
    assert (await admin.get("/admin/devices", params={"precision": "fp5"})).status_code == 422


async def test_live_filters_without_a_live_runtime_are_a_409_naming_them(admin) -> None:
    await _devices(admin)
    listed = (await admin.get("/admin/devices")).json()["items"]
    assert {d["free_mib"] for d in listed} == {None}
    for name in ("min_free_mib", "max_load"):
        r = await admin.get("/admin/devices", params={name: 1})
        assert r.status_code == 409 and r.json()["field"] == f"query.{name}", r.text
