"""A canary set and stopped from Models and placement (AppTest) against the real API with a
live runtime: tiny GPT-2 generators ``tiny-gen:1`` and ``tiny-gen:2`` on one CPU worker. The
page sends 25% of tiny-gen:1's runs to version 2, the running core reports it (state, fraction,
per-variant figures shown), each change is audited, and the stop button ends it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from streamlit.testing.v1 import AppTest

from control.api.settings import GatewayConfig
from control.executor.protocol import ModelRef
from control.services import build_services
from control.wiring.gateway import gateway_app
from db.session import make_engine, make_session_factory
from tests.app import stack
from tests.app.conftest import ADMIN_TOKEN, MAIN, open_page, signed_in

pytestmark = pytest.mark.slow
V2 = ModelRef("tiny-gen:2", "generate", "tiny", "gpt2")


@pytest.fixture(scope="module")
def live_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[stack.Served]:
    root = tmp_path_factory.mktemp("canary")
    url = f"sqlite:///{root / 'legato.db'}"
    stack.seed(url, live=True)
    factory = make_session_factory(make_engine(url))
    services = build_services(factory, key_pepper=stack.PEPPER)
    services.models.create("test", name="tiny-gen", version="2", task="generate",
                           weights_source="declared", weights_location="tiny test model",
                           memory_mib=16, max_batch_size=8, max_batch_tokens=4096)  # fmt: skip
    options = stack._live_options()
    options = dataclasses.replace(options, model_refs={**options.model_refs, "tiny-gen:2": V2})
    executor = stack._live_executor(root / "models")
    app = gateway_app(services, GatewayConfig(admin_token=ADMIN_TOKEN), executor, options)
    served = stack.serve_in_thread(app, start_timeout_s=120)
    yield served
    served.stop()


@pytest.fixture
def http(live_api: stack.Served) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=live_api.url, headers=headers, timeout=30) as client:
        yield client


@pytest.fixture
def page(live_api: stack.Served, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("LEGATO_API_URL", live_api.url)
    monkeypatch.delenv("LEGATO_ADMIN_TOKEN", raising=False)
    monkeypatch.setenv("LEGATO_VAR_DIR", str(Path("/nonexistent-legato-var")))
    at = AppTest.from_file(str(MAIN), default_timeout=60)
    return open_page(signed_in(at), "placement.py")


def _audits(http: httpx.Client) -> list[tuple[str, str]]:
    """(actor, action) of the canary's audit records, oldest first."""
    items = http.get("/admin/audit", params={"entity_type": "model_canary", "limit": 100}).json()
    return [(r["actor"], r["action"]) for r in sorted(items["items"], key=lambda r: r["at"])]


def test_a_canary_is_set_shown_and_stopped_from_the_page(http, page: AppTest) -> None:
    before = _audits(http)
    page.selectbox(key="cn_model").select("tiny-gen").run()
    assert any("No canary has run" in c.value for c in page.caption)
    page.selectbox(key="cn_version").select("2")
    page.number_input(key="cn_percent").set_value(25.0)
    page.button(key="cn_set").click().run()
    assert not page.exception, [e.message for e in page.exception]
    assert any("Canary of tiny-gen:2 set to 25%" in s.value for s in page.success)
    state = http.get("/admin/models/tiny-gen/canary").json()
    assert (state["state"], state["fraction"], state["canary_key"]) == (
        "running", 0.25, "tiny-gen:2")  # fmt: skip
    variants = next(d.value for d in page.dataframe if "error_rate" in d.value.columns)
    assert list(variants["model_key"]) == ["tiny-gen:1", "tiny-gen:2"]
    assert ("admin", "canary_set") in _audits(http)[len(before) :]
    page.button(key="cn_stop").click().run()
    assert any("Canary of tiny-gen stopped" in s.value for s in page.success)
    state = http.get("/admin/models/tiny-gen/canary").json()
    assert state["fraction"] == 0.0 and state["state"] != "running", state
    assert _audits(http)[len(before) :].count(("admin", "canary_set")) == 2
