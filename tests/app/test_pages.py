"""Every console page in AppTest against the real API: renders, one mutation per page, and
refused bad input that changes nothing."""

from __future__ import annotations

import time

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from tests.app.conftest import ADMIN_TOKEN, open_page, signed_in

PAGES = ["overview.py", "fairshare.py", "devices.py", "placement.py", "workflows.py",
         "tenants.py", "whatif.py", "usage.py", "timeline.py"]  # fmt: skip


def test_sign_in_refuses_a_wrong_credential_and_accepts_the_admin(console: AppTest) -> None:
    console.run()
    console.text_input(key="sign_in_token").input("wrong-token")
    console.button[0].click().run()
    assert any("Sign-in refused" in e.value for e in console.error)
    assert "conn" not in console.session_state
    console.text_input(key="sign_in_token").input(ADMIN_TOKEN)
    console.button[0].click().run()
    assert "conn" in console.session_state


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_without_exception(console: AppTest, page: str) -> None:
    open_page(signed_in(console), page)
    assert console.title[0].value
    # under the title, one line saying what the page is for (issue 25, item 6)
    purpose = console.main.caption[0].value
    assert "\n" not in purpose and purpose.endswith(".") and 40 < len(purpose) <= 140, purpose


def _api(api):  # noqa: ANN001, ANN202
    import httpx

    return httpx.Client(base_url=api.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})


def _rows(api, path: str, **params) -> list[dict]:  # noqa: ANN001
    with _api(api) as http:
        return http.get(path, params={"limit": 1000, **params}).json()["items"]


def test_workflow_node_edit_saves_a_new_version_and_keeps_the_old(api, console) -> None:
    open_page(signed_in(console), "workflows.py")
    console.selectbox(key="wf_name").select("rag").run()
    before = {w["version"] for w in _rows(api, "/admin/workflows", name="rag")}
    console.selectbox(key="wf_node").select("answer").run()
    console.number_input(key="wf_p_retries").set_value(3)
    next(b for b in console.button if b.label == "Apply to node").click().run()
    console.button(key="wf_save").click().run()
    assert not console.exception
    saved = {w["version"]: w for w in _rows(api, "/admin/workflows", name="rag")}
    (new,) = saved.keys() - before
    answer = next(n for n in saved[new]["spec"]["nodes"] if n["id"] == "answer")
    assert answer["retries"] == 3
    old = next(n for n in saved["1"]["spec"]["nodes"] if n["id"] == "answer")
    assert old["retries"] == 1
    assert any(f"Saved rag version {new}" in s.value for s in console.success)


def test_workflow_with_unknown_model_is_refused_on_its_node(api, console) -> None:
    open_page(signed_in(console), "workflows.py")
    console.selectbox(key="wf_name").select("agent").run()
    before = len(_rows(api, "/admin/workflows", name="agent"))
    spec = yaml.safe_load(console.text_area(key="wf_yaml").value)
    next(n for n in spec["nodes"] if n["id"] == "draft")["model"] = "nope:9"
    console.text_area(key="wf_yaml").input(yaml.safe_dump(spec)).run()
    console.button(key="wf_save").click().run()
    assert len(_rows(api, "/admin/workflows", name="agent")) == before
    messages = [e.value for e in console.error]
    assert any(m.startswith("draft:") and "nope:9" in m for m in messages), messages


def test_headroom_reservation_is_added_and_bad_percent_refused(api, console) -> None:
    open_page(signed_in(console), "devices.py")
    console.text_input(key="hr_name").input("ui-h100-burst")
    console.radio(key="hr_scope").set_value("accelerator")
    console.selectbox(key="hr_accel").select("H100-80GB")
    console.number_input(key="hr_percent").set_value(12.0)
    console.button(key="hr_save").click().run()
    made = _rows(api, "/admin/headroom", name="ui-h100-burst")
    assert made and made[0]["reserved_milli"] == 120
    assert made[0]["selector"] == {"accelerator": "H100-80GB"}
    console.selectbox(key="hr_pick").set_value(None).run()
    console.text_input(key="hr_name").input("ui-too-much")
    console.number_input(key="hr_percent").set_value(80.0)
    console.button(key="hr_save").click().run()
    assert not _rows(api, "/admin/headroom", name="ui-too-much")
    assert any(e.value.startswith("reserved_milli:") for e in console.error), [
        e.value for e in console.error
    ]


def test_api_key_is_shown_once_and_revoked(api, console) -> None:
    open_page(signed_in(console), "tenants.py")
    tenant = console.selectbox(key="key_tenant").value
    console.text_input(key="key_label").input("ui-key")
    console.button(key="key_issue").click().run()
    shown = [c.value for c in console.code]
    assert len(shown) == 1 and shown[0].startswith("lg_")
    keys = [k for k in _rows(api, "/admin/keys", tenant_id=tenant) if k["label"] == "ui-key"]
    assert len(keys) == 1 and keys[0]["revoked_at"] is None
    console.run()
    assert not console.code  # shown once only
    console.selectbox(key="key_revoke_pick").select(keys[0]["id"])
    console.button(key="key_revoke").click().run()
    keys = [k for k in _rows(api, "/admin/keys", tenant_id=tenant) if k["label"] == "ui-key"]
    assert keys[0]["revoked_at"] is not None


def test_placement_draft_edit_shows_in_the_diff(api, console) -> None:
    open_page(signed_in(console), "placement.py")
    console.button(key="plan_new").click().run()
    drafts = _rows(api, "/admin/placement-plans", status="draft")
    assert drafts
    console.session_state["draft_table"] = {"edited_rows": {0: {"replicas": 2}},
                                            "added_rows": [], "deleted_rows": []}  # fmt: skip
    console.run()
    console.button(key="draft_save").click().run()
    rows = _rows(api, "/admin/placements", plan_id=console.selectbox(key="plan_pick").value)
    assert sorted(r["replicas"] for r in rows)[-1] == 2
    assert any("1 change(s)" in s.value for s in console.subheader)


def test_whatif_runs_variants_on_the_twin_and_shows_deltas(api, console) -> None:
    from tests.app.test_headroom_preview import wait_for_twin

    open_page(signed_in(console), "whatif.py")
    console.slider(key="wi_headroom").set_value(30)
    console.slider(key="wi_quota").set_value(50)
    console.number_input(key="wi_requests").set_value(60)
    console.number_input(key="wi_seeds").set_value(2)
    console.button[0].click().run()
    assert not console.error, [e.value for e in console.error]
    wait_for_twin(console, "whatif")
    run = _rows(api, "/admin/whatif")[-1]
    assert run["status"] == "succeeded", run["error"]
    assert run["scenario"]["requested"] == {"headroom 30%": {"headroom_reserved_milli": 300},
                                            "quotas x50%": {"quota_scale_milli": 500}}  # fmt: skip
    table = next(d.value for d in console.dataframe if "variant_name" in d.value.columns)
    assert set(table["variant_name"]) == {"headroom 30%", "quotas x50%"}
    assert len(console.get("plotly_chart")) == 2  # one chart per variant


def test_audit_filter_narrows_the_log(api, console) -> None:
    open_page(signed_in(console), "usage.py")
    console.text_input(key="audit_entity").input("tenant").run()
    caption = next(c.value for c in console.caption if "record(s) match" in c.value)
    total = int(caption.split()[0])
    assert 0 < total < len(_rows(api, "/admin/audit"))


def test_rollout_without_live_runtime_shows_the_api_message_and_changes_nothing(
    api, console
) -> None:
    open_page(signed_in(console), "placement.py")
    if not _rows(api, "/admin/placement-plans", status="draft"):
        console.button(key="plan_new").click().run()
    pick = console.selectbox(key="plan_pick").value
    assert any("Rollouts need the live runtime" in i.value for i in console.info)
    console.button(key="plan_rollout").click().run()
    messages = [e.value for e in console.error]
    assert any("503" in m and "live runtime" in m for m in messages), messages
    plan = next(p for p in _rows(api, "/admin/placement-plans") if p["id"] == pick)
    assert plan["status"] == "draft"
    assert console.button(key="plan_back").disabled  # nothing was rolled out: nothing to undo
    assert len(_rows(api, "/admin/placement-plans", status="active")) == 1


def test_draft_is_simulated_in_the_twin_with_its_deltas(api, console) -> None:
    from tests.app.test_headroom_preview import wait_for_twin

    open_page(signed_in(console), "placement.py")
    if not _rows(api, "/admin/placement-plans", status="draft"):
        console.button(key="plan_new").click().run()
    pick = console.selectbox(key="plan_pick").value
    console.button(key="plan_sim").click().run()
    wait_for_twin(console, "plan_sim")
    run = _rows(api, "/admin/whatif")[-1]
    assert run["status"] == "succeeded", run["error"]
    assert run["scenario"]["requested"] == {f"plan #{pick}": {"plan_id": pick}}
    table = next(d.value for d in console.dataframe if "variant_name" in d.value.columns)
    assert set(table["variant_name"]) == {f"plan #{pick}"}


def test_the_twin_gate_replays_a_draft_and_shows_its_report(api, console) -> None:
    """The gate on Models and placement: a draft is not simulated (its rollout would need the
    force switch); the replay button makes it ``simulated`` with the twin's report stored and
    shown, current beside plan (issue 24, item 2: the report is shown on the console)."""
    open_page(signed_in(console), "placement.py")
    if not _rows(api, "/admin/placement-plans", status="draft"):
        console.button(key="plan_new").click().run()
    pick = console.selectbox(key="plan_pick").value
    assert not console.checkbox(key="plan_force").disabled  # not simulated: force is offered
    console.button(key="plan_gate_sim").click().run()
    assert not console.error, [e.value for e in console.error]
    deadline = time.monotonic() + 240
    while True:
        plan = next(p for p in _rows(api, "/admin/placement-plans") if p["id"] == pick)
        if (plan.get("simulation") or {}).get("state") not in (None, "running"):
            break
        assert time.monotonic() < deadline, plan.get("simulation")
        time.sleep(0.5)
    assert plan["simulation"]["state"] == "done" and plan["status"] == "simulated", plan
    console.run()
    report = next(d.value for d in console.dataframe if "tenant" in d.value.columns)
    p99 = report[(report["tenant"] == "all tenants") & (report["figure"] == "p99 latency (s)")]
    assert (p99[["current", "plan"]] > 0).all(axis=None)  # current beside plan
    assert console.checkbox(key="plan_force").disabled  # simulated: nothing to force


def test_a_plan_is_proposed_from_observed_demand(api, console) -> None:
    open_page(signed_in(console), "placement.py")
    before = {p["id"] for p in _rows(api, "/admin/placement-plans")}
    console.button(key="plan_propose").click().run()
    assert not console.error, [e.value for e in console.error]
    made = [p for p in _rows(api, "/admin/placement-plans") if p["id"] not in before]
    assert [p["status"] for p in made] == ["proposed"], made
    assert console.selectbox(key="plan_pick").value == made[0]["id"]  # shown for its gate
    assert "Not simulated" in " ".join(c.value for c in console.caption)
