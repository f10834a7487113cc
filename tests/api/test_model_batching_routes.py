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
    ("start", "change", "field", "detail"),
    [
        ({"task": "rerank"}, {"continuous_batching": True}, "continuous_batching",
         "continuous_batching"),
        ({"continuous_batching": True}, {"task": "classify"}, "task", "continuous_batching"),
        # prefill_chunk_tokens: chunked prefill, with continuous batching only
        ({}, {"prefill_chunk_tokens": 512}, "prefill_chunk_tokens",
         "chunked prefill needs continuous"),
        ({"continuous_batching": True, "prefill_chunk_tokens": 512},
         {"continuous_batching": False}, "continuous_batching",
         "chunked prefill needs continuous"),
    ],
)  # fmt: skip
async def test_patch_to_a_contradiction_is_refused_and_writes_nothing(
    stack, admin, start: dict, change: dict, field: str, detail: str
) -> None:
    made = (await admin.post("/admin/models", json={**LLM, **start})).json()
    before = row_counts(stack.factory)
    r = await admin.patch(f"/admin/models/{made['id']}", json=change)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and detail in r.json()["detail"]
    assert row_counts(stack.factory) == before
    assert (await admin.get(f"/admin/models/{made['id']}")).json() == made


async def test_a_non_boolean_is_refused_by_the_schema(admin) -> None:
    r = await admin.post("/admin/models", json={**LLM, "continuous_batching": [1]})
    assert r.status_code == 422 and r.json()["field"] == "body.continuous_batching"


# ----- prefill_chunk_tokens: chunked prefill, with continuous batching only


async def test_chunk_budget_round_trips_and_reaches_the_model(admin) -> None:
    r = await admin.post("/admin/models", json={**LLM, "continuous_batching": True,
                                                "prefill_chunk_tokens": 512})  # fmt: skip
    assert r.status_code == 201, r.text
    assert r.json()["prefill_chunk_tokens"] == 512
    item = f"/admin/models/{r.json()['id']}"
    r = await admin.patch(item, json={"prefill_chunk_tokens": 256})
    assert r.status_code == 200 and r.json()["prefill_chunk_tokens"] == 256
    # turning both off in one change is consistent
    r = await admin.patch(item, json={"continuous_batching": False, "prefill_chunk_tokens": 0})
    assert r.status_code == 200 and r.json()["prefill_chunk_tokens"] == 0
    plain = await admin.post("/admin/models", json={**LLM, "name": "plain"})
    assert plain.json()["prefill_chunk_tokens"] == 0  # off unless asked for


async def test_a_create_asking_for_chunks_without_the_loop_is_refused(stack, admin) -> None:
    before = row_counts(stack.factory)
    r = await admin.post("/admin/models", json={**LLM, "prefill_chunk_tokens": 64})
    assert r.status_code == 422 and r.json()["field"] == "prefill_chunk_tokens"
    r = await admin.post("/admin/models", json={**LLM, "continuous_batching": True,
                                                "prefill_chunk_tokens": -1})  # fmt: skip
    assert r.status_code == 422 and r.json()["field"] == "body.prefill_chunk_tokens"
    assert row_counts(stack.factory) == before
