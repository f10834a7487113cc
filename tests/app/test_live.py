"""The live pages against a real API with the live runtime (tiny models on one CPU worker):
the fair-share panel counts a tenant's run and its service, the overview shows it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.app.conftest import ADMIN_TOKEN, MAIN, open_page, signed_in
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
    monkeypatch.delenv("LEGATO_ADMIN_TOKEN", raising=False)
    at = signed_in(AppTest.from_file(str(MAIN), default_timeout=30))
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
    monkeypatch.delenv("LEGATO_ADMIN_TOKEN", raising=False)
    _run_as(live_api, "acme")
    st.cache_data.clear()  # the loaders keep answers for a few seconds; start fresh
    at = signed_in(AppTest.from_file(str(MAIN), default_timeout=30))
    assert not at.exception
    frame = next(d.value for d in at.dataframe if "slo_attainment" in d.value.columns)
    row = frame[frame["workflow"] == "tiny:1"].iloc[0]
    assert row["succeeded"] >= 1 and row["p50_s"] is not None


def test_workflow_test_run_shows_outputs_and_per_node_timing(live_api: Served, monkeypatch) -> None:
    monkeypatch.setenv("LEGATO_API_URL", live_api.url)
    monkeypatch.delenv("LEGATO_ADMIN_TOKEN", raising=False)
    at = signed_in(AppTest.from_file(str(MAIN), default_timeout=60))
    open_page(at, "workflows.py")
    at.selectbox(key="wf_name").select("tiny").run()
    at.text_area(key="wf_inputs").input('{"prompt": "hello there"}')
    next(b for b in at.button if b.label.startswith("Run version")).click().run()
    assert not at.exception
    assert any("succeeded" in str(m.value) for m in at.markdown), [m.value for m in at.markdown]
    steps = next(d.value for d in at.dataframe if "device_ms" in d.value.columns)
    assert list(steps["node"]) == ["gen"] and steps["device_ms"].iloc[0] >= 0
    with httpx.Client(base_url=live_api.url) as http:
        keys = http.get("/admin/keys", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()
    # the run goes through the admin test-run route as the tenant: no key is minted for it
    assert not [k for k in keys["items"] if k["label"] == "console test run"]


def _wait_plan(api: Served, plan_id: int, status: str, at: AppTest, timeout_s: float = 60) -> None:
    """Rerun the page (as its progress fragment would) until the plan reaches ``status``."""
    import time

    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    deadline = time.monotonic() + timeout_s
    while True:
        with httpx.Client(base_url=api.url, headers=admin) as http:
            plan = http.get(f"/admin/placement-plans/{plan_id}").json()
        if plan["status"] == status:
            return
        if time.monotonic() > deadline:
            with httpx.Client(base_url=api.url, headers=admin) as http:
                progress = http.get(f"/admin/placement-plans/{plan_id}/rollout").json()
            raise AssertionError(f"plan {plan_id} stayed {plan['status']}: {progress}")
        time.sleep(0.5)
        at.run()
        assert not at.exception, [e.message for e in at.exception]


def test_draft_is_rolled_out_and_rolled_back_from_the_console(live_api, monkeypatch) -> None:
    monkeypatch.setenv("LEGATO_API_URL", live_api.url)
    monkeypatch.delenv("LEGATO_ADMIN_TOKEN", raising=False)
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=live_api.url, headers=admin) as http:
        devices = http.get("/admin/devices", params={"limit": 1000}).json()["items"]
        cpu = next(d["id"] for d in devices if d["name"] == "cpu:0")
        models = {m["name"]: m["id"] for m in http.get("/admin/models").json()["items"]}
        plan = http.post("/admin/placement-plans", json={"note": "two tiny-gen"}).json()["id"]
        for name, replicas in (("tiny-gen", 2), ("tiny-embed", 1)):
            r = http.post("/admin/placements", json={"plan_id": plan, "model_id": models[name],
                          "device_ids": [cpu], "replicas": replicas, "pool": "hot"})  # fmt: skip
            assert r.status_code == 201, r.text
        # the API rolls out only a plan the twin has simulated (issue 24, item 2)
        assert http.post(f"/admin/placement-plans/{plan}/simulate").status_code == 202
        for _ in range(600):
            sim = http.get(f"/admin/placement-plans/{plan}").json()["simulation"]
            if sim["state"] != "running":
                break
            threading.Event().wait(0.2)
        assert sim["state"] == "done", sim
    st.cache_data.clear()
    at = signed_in(AppTest.from_file(str(MAIN), default_timeout=30))
    open_page(at, "placement.py")
    at.selectbox(key="plan_pick").select(plan).run()
    at.button(key="plan_rollout").click().run()
    assert not at.error, [e.value for e in at.error]
    shown = [s.value for s in at.success] + [p.proto.text for p in at.get("progress")]
    # the confirmation, unless the tiny rollout already finished and the page moved on
    assert any(f"Rollout of plan #{plan} started" in t or f"plan #{plan}: completed" in t
               for t in shown), shown  # fmt: skip
    _wait_plan(live_api, plan, "active", at)
    at.run()
    bar = at.get("progress")[0].proto
    assert bar.value == 100 and bar.text.startswith(f"Rollout of plan #{plan}: completed")
    at.button(key="plan_back").click().run()
    assert not at.error, [e.value for e in at.error]
    _wait_plan(live_api, plan, "rolled_back", at)
    at.run()
    text = at.get("progress")[0].proto.text
    assert text.startswith(f"Rollback of plan #{plan}: completed"), text
    assert at.button(key="plan_back").disabled  # rolled back already: nothing left to undo


def test_rollout_the_api_refuses_is_shown_and_changes_nothing(live_api, monkeypatch) -> None:
    monkeypatch.setenv("LEGATO_API_URL", live_api.url)
    monkeypatch.delenv("LEGATO_ADMIN_TOKEN", raising=False)
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=live_api.url, headers=admin) as http:
        devices = http.get("/admin/devices", params={"limit": 1000}).json()["items"]
        gpu = next(d["id"] for d in devices if d["name"] == "gpu-a-0" and not d["is_real"])
        models = http.get("/admin/models", params={"limit": 1000}).json()["items"]
        model = next(m["id"] for m in models if m["name"] == "tiny-gen")
        plan = http.post("/admin/placement-plans", json={"note": "declared only"}).json()["id"]
        r = http.post("/admin/placements", json={"plan_id": plan, "model_id": model,
                      "device_ids": [gpu], "replicas": 1, "pool": "hot"})  # fmt: skip
        assert r.status_code == 201, r.text
        before = http.get("/admin/snapshot").json()["replicas"]
    st.cache_data.clear()
    at = signed_in(AppTest.from_file(str(MAIN), default_timeout=30))
    open_page(at, "placement.py")
    at.selectbox(key="plan_pick").select(plan).run()
    at.button(key="plan_rollout").click().run()
    messages = [e.value for e in at.error]
    assert any("409" in m and "real device" in m for m in messages), messages
    with httpx.Client(base_url=live_api.url, headers=admin) as http:
        assert http.get(f"/admin/placement-plans/{plan}").json()["status"] == "draft"
        assert http.get("/admin/snapshot").json()["replicas"] == before
