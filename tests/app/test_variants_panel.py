"""Precision variants on the Models and placement page: the operator registers and retires a
variant through the API; a refused precision (the base's own fp32) shows the API's message under
the precision field and changes nothing; the table flags quality below the exact floor."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from streamlit.testing.v1 import AppTest

from app.variants_panel import variant_rows
from tests.app.conftest import ADMIN_TOKEN, open_page, signed_in


@pytest.fixture
def http(api) -> Iterator[httpx.Client]:  # noqa: ANN001
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=api.url, headers=headers) as client:
        yield client


def test_rows_flag_quality_below_the_floor_and_leave_unmeasured_ones_open():
    items = [
        {"precision": "int8", "status": "active", "memory_mib": 56, "load_time_ms": 300,
         "quality": {"metric": "cosine", "score": 0.978, "mean": 0.978, "min": 0.969,
                     "inputs": 64}, "quality_measured_at": "2026-01-01T00:00:00Z"},
        {"precision": "bf16", "status": "active", "memory_mib": 44, "load_time_ms": 100,
         "quality": {"metric": "cosine", "score": 0.99995, "mean": 0.99995, "min": 0.9999,
                     "inputs": 64}, "quality_measured_at": "2026-01-01T00:00:00Z"},
        {"precision": "fp16", "status": "active", "memory_mib": None, "load_time_ms": None,
         "quality": {}, "quality_measured_at": None},
    ]  # fmt: skip
    rows = variant_rows(items, 0.99)
    assert [r["below_exact_floor"] for r in rows] == [True, False, None]
    assert rows[0]["min"] == 0.969 and rows[0]["inputs"] == 64


def _variants(http: httpx.Client, model_id: int) -> dict[str, str]:
    found = http.get(f"/admin/models/{model_id}/variants", params={"include_retired": True})
    return {v["precision"]: v["status"] for v in found.json()["items"]}


def test_operator_registers_is_refused_and_retires(http, console: AppTest) -> None:
    models = http.get("/admin/models", params={"limit": 1000}).json()["items"]
    target = next(m for m in models if m["name"] == "smollm2-135m")
    open_page(signed_in(console), "placement.py")
    console.selectbox(key="mv_pick").set_value(target["id"]).run()
    try:
        console.selectbox(key=f"mv_precision_{target['id']}").set_value("int8")
        console.button(key="mv_add").click().run()
        assert not console.exception, [e.message for e in console.exception]
        assert _variants(http, target["id"]) == {"int8": "active"}
        assert any("int8 registered" in s.value for s in console.success)
        shown = next(d.value for d in console.dataframe if "below_exact_floor" in d.value.columns)
        assert list(shown["precision"]) == ["int8"]

        console.selectbox(key=f"mv_precision_{target['id']}").set_value("fp32")
        console.button(key="mv_add").click().run()
        assert any(e.value.startswith("precision:") and "base model" in e.value
                   for e in console.error), [e.value for e in console.error]  # fmt: skip
        assert _variants(http, target["id"]) == {"int8": "active"}

        console.selectbox(key=f"mv_retire_{target['id']}").set_value("int8")
        console.button(key="mv_retire").click().run()
        assert _variants(http, target["id"]) == {"int8": "retired"}
    finally:  # the API is shared by the module's tests: leave no active variant behind
        http.delete(f"/admin/models/{target['id']}/variants/int8")
