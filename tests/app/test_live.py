"""The live pages against a real API with the live runtime (tiny models on one CPU worker):
the fair-share panel counts a tenant's run and its service, the overview shows it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.app.conftest import ADMIN_TOKEN, MAIN, open_page
from tests.app.stack import Served, build_app, seed, serve_in_thread

pytestmark = pytest.mark.slow  # starts an executor worker process (about 20 s)


@pytest.fixture(scope="module")
def live_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("console-live")
    url = f"sqlite:///{root / 'legato.db'}"
    seed(url, live=True)
    served = serve_in_thread(build_app(url, ADMIN_TOKEN, live=True, cache=root / "models"))
    yield served
    served.stop()


def _run_as(api: Served, tenant: str) -> dict:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=api.url, timeout=60) as http:
        tid = http.get("/admin/tenants", params={"name": tenant}, headers=admin).json()["items"][0][
            "id"
        ]
        key = http.post(f"/admin/tenants/{tid}/keys", json={"label": "t"}, headers=admin).json()[
            "key"
        ]
        r = http.post("/v1/workflows/tiny/versions/1/runs", json={"inputs": {"prompt": "hi"}},
                      headers={"Authorization": f"Bearer {key}"})  # fmt: skip
    assert r.status_code == 200, r.text
    return r.json()


def test_fair_share_panel_reflects_a_served_run(live_api: Served, monkeypatch) -> None:
    monkeypatch.setenv("LEGATO_API_URL", live_api.url)
    monkeypatch.setenv("LEGATO_ADMIN_TOKEN", ADMIN_TOKEN)
    at = AppTest.from_file(str(MAIN), default_timeout=30).run()
    open_page(at, "fairshare.py")
    caption = next(c.value for c in at.caption if "runs started" in c.value)
    assert "Policy:" in caption and " 0 runs started" in caption
    assert len(at.get("plotly_chart")) == 2
    run = _run_as(live_api, "globex")
    assert run["status"] == "succeeded"
    at.run()
    caption = next(c.value for c in at.caption if "runs started" in c.value)
    assert " 1 runs started" in caption
    frame = next(d.value for d in at.dataframe if "share_received" in d.value.columns)
    shares = dict(zip(frame["tenant"], frame["share_received"], strict=True))
    assert shares["globex"] == pytest.approx(1.0) and shares["acme"] == 0.0


def test_overview_counts_the_run_per_workflow(live_api: Served, monkeypatch) -> None:
    monkeypatch.setenv("LEGATO_API_URL", live_api.url)
    monkeypatch.setenv("LEGATO_ADMIN_TOKEN", ADMIN_TOKEN)
    _run_as(live_api, "acme")
    st.cache_data.clear()  # the loaders keep answers for a few seconds; start fresh
    at = AppTest.from_file(str(MAIN), default_timeout=30).run()
    assert not at.exception
    frame = next(d.value for d in at.dataframe if "slo_attainment" in d.value.columns)
    row = frame[frame["workflow"] == "tiny:1"].iloc[0]
    assert row["succeeded"] >= 1 and row["p50_s"] is not None


def test_workflow_test_run_shows_outputs_and_per_node_timing(live_api: Served, monkeypatch) -> None:
    monkeypatch.setenv("LEGATO_API_URL", live_api.url)
    monkeypatch.setenv("LEGATO_ADMIN_TOKEN", ADMIN_TOKEN)
    at = AppTest.from_file(str(MAIN), default_timeout=60).run()
    open_page(at, "workflows.py")
    at.selectbox(key="wf_name").select("tiny").run()
    at.text_area(key="wf_inputs").input('{"prompt": "hello there"}')
    at.button[-1].click().run()
    assert not at.exception
    assert any("succeeded" in str(m.value) for m in at.markdown), [m.value for m in at.markdown]
    steps = next(d.value for d in at.dataframe if "device_ms" in d.value.columns)
    assert list(steps["node_id"]) == ["gen"] and steps["device_ms"].iloc[0] >= 0
    with httpx.Client(base_url=live_api.url) as http:
        keys = http.get("/admin/keys", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()
    test_keys = [k for k in keys["items"] if k["label"] == "console test run"]
    assert test_keys and all(k["revoked_at"] for k in test_keys)  # the temporary key is revoked
