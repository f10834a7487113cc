"""The continuous_batching setting over the admin API: shown on every model, set on create and
by PATCH, and refused with a 422 naming the field (nothing written) where the task is not
generate, judged on the model as it would be after the change."""

from __future__ import annotations

import pytest

from tests.services.builders import row_counts

LLM = {"name": "llm", "version": "1", "task": "generate", "weights_source": "declared",
       "weights_location": "twin only", "memory_mib": 1000}  # fmt: skip


async def test_create_and_patch_round_trip(admin) -> None:
    r = await admin.post("/admin/models", json=LLM)
    assert r.status_code == 201, r.text
    assert r.json()["continuous_batching"] is False
    item = f"/admin/models/{r.json()['id']}"
    r = await admin.patch(item, json={"continuous_batching": True})
    assert r.status_code == 200, r.text
    assert (await admin.get(item)).json()["continuous_batching"] is True
    on = await admin.post("/admin/models", json={**LLM, "name": "llm2",
                                                 "continuous_batching": True})  # fmt: skip
    assert on.status_code == 201 and on.json()["continuous_batching"] is True
    listed = (await admin.get("/admin/models")).json()["items"]
    assert {m["name"]: m["continuous_batching"] for m in listed} == {"llm": True, "llm2": True}
    audit = (await admin.get("/admin/audit", params={"entity_type": "model"})).json()["items"]
    update = next(a for a in audit if a["action"] == "update")
    assert (update["before"]["continuous_batching"], update["after"]["continuous_batching"]) == (
        False, True,
    )  # fmt: skip


async def test_create_on_an_encoder_is_refused_and_writes_nothing(stack, admin) -> None:
    before = row_counts(stack.factory)
    body = {**LLM, "name": "enc", "task": "embed", "continuous_batching": True}
    r = await admin.post("/admin/models", json=body)
    assert r.status_code == 422, r.text
    err = r.json()
    assert err["field"] == "continuous_batching"
    assert "continuous_batching" in err["detail"] and "'embed'" in err["detail"]
    assert "only generate models" in err["detail"]
    assert row_counts(stack.factory) == before


@pytest.mark.parametrize(
    ("start", "change", "field"),
    [
        ({"task": "rerank"}, {"continuous_batching": True}, "continuous_batching"),
        ({"continuous_batching": True}, {"task": "classify"}, "task"),
    ],
)
async def test_patch_to_a_contradiction_is_refused_and_writes_nothing(
    stack, admin, start: dict, change: dict, field: str
) -> None:
    made = (await admin.post("/admin/models", json={**LLM, **start})).json()
    before = row_counts(stack.factory)
    r = await admin.patch(f"/admin/models/{made['id']}", json=change)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and "continuous_batching" in r.json()["detail"]
    assert row_counts(stack.factory) == before
    assert (await admin.get(f"/admin/models/{made['id']}")).json() == made


async def test_a_non_boolean_is_refused_by_the_schema(admin) -> None:
    r = await admin.post("/admin/models", json={**LLM, "continuous_batching": [1]})
    assert r.status_code == 422 and r.json()["field"] == "body.continuous_batching"
