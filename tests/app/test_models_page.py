"""The models section of the Models and placement page: every model's batching mode is shown,
the operator turns continuous batching on and off through the API, and a refusal (an encoder)
shows the API's message under the checkbox and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from streamlit.testing.v1 import AppTest

from app.models_editor import changes
from tests.app.conftest import ADMIN_TOKEN, open_page, signed_in


@pytest.fixture
def http(api) -> Iterator[httpx.Client]:  # noqa: ANN001
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=api.url, headers=headers) as client:
        yield client


def _models(http: httpx.Client) -> dict[str, dict]:
    items = http.get("/admin/models", params={"limit": 1000}).json()["items"]
    return {f"{m['name']}:{m['version']}": m for m in items}


def _edit(at: AppTest, model_id: int, continuous: bool) -> AppTest:
    at.selectbox(key="me_pick").set_value(model_id).run()
    box = at.checkbox(key=f"me_continuous_{model_id}")
    box.check() if continuous else box.uncheck()  # a form's widgets send with its submit
    at.button(key="me_save").click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_table_shows_each_models_batching_mode(http, console: AppTest) -> None:
    open_page(signed_in(console), "placement.py")
    shown = next(d.value for d in console.dataframe if "continuous_batching" in d.value.columns)
    by_key = {f"{n}:{v}": c for n, v, c in
              zip(shown["name"], shown["version"], shown["continuous_batching"], strict=True)}  # fmt: skip
    assert by_key == {k: m["continuous_batching"] for k, m in _models(http).items()}
    assert by_key["llama-70b:1"] and not by_key["smollm2-135m:1"]


def test_operator_turns_continuous_batching_on_and_off(http, console: AppTest) -> None:
    target = _models(http)["smollm2-135m:1"]
    assert target["continuous_batching"] is False
    open_page(signed_in(console), "placement.py")
    try:
        _edit(console, target["id"], True)
        assert _models(http)["smollm2-135m:1"]["continuous_batching"] is True
        assert any("smollm2-135m:1 saved" in s.value for s in console.success)
        _edit(console, target["id"], False)
        assert _models(http)["smollm2-135m:1"]["continuous_batching"] is False
    finally:  # the API is shared by the module's tests: leave the seeded value
        http.patch(f"/admin/models/{target['id']}", json={"continuous_batching": False})


def test_refused_on_an_encoder_with_the_apis_message(http, console: AppTest) -> None:
    before = _models(http)
    encoder = before["minilm-embed:1"]
    audit = http.get("/admin/audit", params={"limit": 1}).json()["total"]
    open_page(signed_in(console), "placement.py")
    _edit(console, encoder["id"], True)
    assert _models(http) == before
    assert http.get("/admin/audit", params={"limit": 1}).json()["total"] == audit
    messages = [e.value for e in console.error]
    assert any(m.startswith("continuous_batching:") and "only generate models" in m
               for m in messages), messages  # fmt: skip
    assert any("Refused by the API (422" in m for m in messages), messages


def test_only_changed_fields_are_sent() -> None:
    model = {"max_batch_size": 8, "max_batch_tokens": 4096, "continuous_batching": False}
    wanted = {"max_batch_size": 8, "max_batch_tokens": 4096, "continuous_batching": True}
    assert changes(model, wanted) == {"continuous_batching": True}
    assert changes(model, dict(model)) == {}


def test_operator_sets_the_prefill_chunk_budget_and_is_refused_without_the_loop(
    http, console: AppTest
) -> None:
    models = _models(http)
    llm, static = models["llama-70b:1"], models["smollm2-135m:1"]
    assert llm["prefill_chunk_tokens"] == 512  # the demo seed's choice
    open_page(signed_in(console), "placement.py")
    try:
        console.selectbox(key="me_pick").set_value(llm["id"]).run()
        console.number_input(key=f"me_chunk_{llm['id']}").set_value(256)
        console.button(key="me_save").click().run()
        assert _models(http)["llama-70b:1"]["prefill_chunk_tokens"] == 256
        # a static model has no decode loop to interleave chunks with: refused, nothing written
        before = _models(http)
        console.selectbox(key="me_pick").set_value(static["id"]).run()
        console.number_input(key=f"me_chunk_{static['id']}").set_value(512)
        console.button(key="me_save").click().run()
        assert _models(http) == before
        messages = [e.value for e in console.error]
        assert any(m.startswith("prefill_chunk_tokens:") and "needs continuous_batching" in m
                   for m in messages), messages  # fmt: skip
    finally:  # the API is shared by the module's tests: leave the seeded value
        http.patch(f"/admin/models/{llm['id']}", json={"prefill_chunk_tokens": 512})
