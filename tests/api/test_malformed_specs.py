"""A malformed workflow spec (a value of the wrong type) is a report of every problem, each
located at its node and field: ``/admin/workflows/validate`` lists them (valid: false) and
``POST /admin/workflows`` refuse with a 422 listing them, nothing written (issue 24,
item 10: ``retries: "abc"`` and ``params: [1, 2]`` were HTTP 500s)."""

from __future__ import annotations

from tests.services.builders import row_counts

MALFORMED = {
    "inputs": {"text": "text"},
    "outputs": {"v": "embed.embedding"},
    "nodes": [{"id": "embed", "task": "embed", "model": "minilm-embed:1", "retries": "abc",
               "params": [1, 2], "timeout_s": "soon"},
              {"id": "other", "task": 7, "model": "minilm-embed:1"}],
    "edges": [{"from": "input.text", "to": "embed.text"}, {"from": "nowhere", "to": "x.y"}],
}  # fmt: skip
EXPECTED = {"nodes[embed].retries", "nodes[embed].params", "nodes[embed].timeout_s",
            "nodes[other].task", "edges[1].from"}  # fmt: skip


async def test_validate_lists_every_malformed_value_located(admin) -> None:
    r = await admin.post("/admin/workflows/validate", json={"spec": MALFORMED})
    assert r.status_code == 200, r.text
    report = r.json()
    assert report["valid"] is False
    assert {p["location"] for p in report["problems"]} == EXPECTED, report
    by_place = {p["location"]: p["message"] for p in report["problems"]}
    assert "'abc'" in by_place["nodes[embed].retries"]
    assert "[1, 2]" in by_place["nodes[embed].params"]


async def test_create_refuses_with_422_and_write_nothing(stack, admin) -> None:
    before = row_counts(stack.factory)
    r = await admin.post("/admin/workflows", json={"name": "bad", "version": "1",
                                                   "spec": MALFORMED})  # fmt: skip
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_workflow"
    assert {p["location"] for p in r.json()["problems"]} == EXPECTED
    assert row_counts(stack.factory) == before
