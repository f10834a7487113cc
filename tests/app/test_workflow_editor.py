"""The Workflows page's DAG editor (AppTest against the real admin API): node edits through the
side panel saved as a new version, refusals shown next to their field with nothing changed,
validation problems marked on their node, a workflow started from a template, versions
activated, retired and diffed."""

from __future__ import annotations

import httpx
from streamlit.testing.v1 import AppTest

from tests.app.conftest import ADMIN_TOKEN, open_page, signed_in


def _rows(api, path: str, **params) -> list[dict]:  # noqa: ANN001
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    return httpx.get(f"{api.url}{path}", params=params, headers=headers).json()["items"]


def _press(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def _editor(console: AppTest, name: str) -> AppTest:
    at = open_page(signed_in(console), "workflows.py")
    at.selectbox(key="wf_name").select(name).run()
    return at


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def test_a_node_added_and_connected_in_the_panel_is_saved_as_a_new_version(api, console) -> None:
    at = _editor(console, "rag")
    before = {w["version"] for w in _rows(api, "/admin/workflows", name="rag")}
    at.text_input(key="wf_new_node_id").input("polish")
    at.selectbox(key="wf_new_node_kind").select("generate")
    _press(at, "Add node")
    assert at.selectbox(key="wf_node").value == "polish"
    at.selectbox(key="wf_p_model").select("smollm2-135m:1")
    at.multiselect(key="wf_p_depends_on").set_value(["answer"])
    at.number_input(key="wf_p_retries").set_value(2)
    at.text_area(key="wf_p_params").input('{"max_tokens": 16}')
    _press(at, "Apply to node")
    assert at.success[0].value == "The draft is valid.", _errors(at)
    at.button(key="wf_save").click().run()
    saved = {w["version"]: w for w in _rows(api, "/admin/workflows", name="rag")}
    (new,) = saved.keys() - before
    node = next(n for n in saved[new]["spec"]["nodes"] if n["id"] == "polish")
    assert node == {"id": "polish", "task": "generate", "model": "smollm2-135m:1", "retries": 2,
                    "params": {"max_tokens": 16}}  # fmt: skip
    assert {"from": "answer.text", "to": "polish.prompt"} in saved[new]["spec"]["edges"]
    assert saved["1"]["spec"] == _rows(api, "/admin/workflows", name="rag", version="1")[0]["spec"]
    assert not any(n["id"] == "polish" for n in saved["1"]["spec"]["nodes"])


def test_a_wrong_model_is_marked_on_its_node_and_the_save_is_refused(api, console) -> None:
    at = _editor(console, "agent")
    before = len(_rows(api, "/admin/workflows", name="agent"))
    at.selectbox(key="wf_node").select("draft").run()
    at.selectbox(key="wf_p_model").select("minilm-embed:1")
    _press(at, "Apply to node")
    marked = [e for e in _errors(at) if e.startswith("draft:")]
    assert marked and "minilm-embed" in marked[0], _errors(at)
    assert (
        "problem"
        in at.session_state["wf_flow_state"][1]
        .nodes[[n.id for n in at.session_state["wf_flow_state"][1].nodes].index("draft")]
        .data["content"]
    )
    at.button(key="wf_save").click().run()
    assert len(_rows(api, "/admin/workflows", name="agent")) == before
    assert any("Refused by the API (422" in e for e in _errors(at)), _errors(at)


def test_refused_panel_edits_show_on_their_field_and_change_nothing(api, console) -> None:
    at = _editor(console, "rag")
    spec = dict(at.session_state["wf_draft"].spec)
    at.text_input(key="wf_new_node_id").input("embed")
    _press(at, "Add node")
    assert any(e.startswith("id: a node 'embed' exists") for e in _errors(at)), _errors(at)
    at.text_area(key="wf_p_params").input("[1, 2]")
    _press(at, "Apply to node")
    assert any(e.startswith("params: must be a mapping") for e in _errors(at)), _errors(at)
    at.text_area(key="wf_yaml").input("- just\n- a list").run()
    assert any(e.startswith("YAML refused") for e in _errors(at)), _errors(at)
    assert at.session_state["wf_draft"].spec == spec


def test_a_node_deleted_in_the_panel_leaves_the_draft_with_its_edges(api, console) -> None:
    at = _editor(console, "rag")
    at.selectbox(key="wf_node").select("rerank").run()
    at.button(key="wf_delete_node").click().run()
    spec = at.session_state["wf_draft"].spec
    assert [n["id"] for n in spec["nodes"]] == ["embed", "search", "answer"]
    assert not any("rerank" in e["from"] + e["to"] for e in spec["edges"])
    diff = next(d.value for d in at.dataframe if "change" in d.value.columns)
    assert ("node", "rerank", "removed") in set(
        zip(diff["part"], diff["name"], diff["change"], strict=True)
    )


def test_a_workflow_from_a_template_is_saved_as_version_one(api, console) -> None:
    at = open_page(signed_in(console), "workflows.py")
    at.text_input(key="wf_new_name").input("rag")
    _press(at, "Start draft")
    assert any("exists" in e for e in _errors(at)), _errors(at)
    at.text_input(key="wf_new_name").input("branchy")
    at.selectbox(key="wf_new_template").select("router with parallel branches")
    _press(at, "Start draft")
    assert at.selectbox(key="wf_name").value == "branchy"
    assert at.success[0].value == "The draft is valid.", _errors(at)
    at.button(key="wf_save").click().run()
    (saved,) = _rows(api, "/admin/workflows", name="branchy")
    assert (saved["version"], saved["status"]) == ("1", "draft")
    assert len(saved["spec"]["nodes"]) == 6
    assert at.selectbox(key="wf_version").value == "1"


def test_versions_are_activated_and_retired_with_an_audit_entry(api, console) -> None:
    at = _editor(console, "agent")
    at.text_area(key="wf_yaml").input(
        at.text_area(key="wf_yaml").value.replace("max_tokens: 24", "max_tokens: 20")
    ).run()
    at.button(key="wf_save").click().run()
    versions = {w["version"]: w for w in _rows(api, "/admin/workflows", name="agent")}
    newest = max(versions, key=int)
    at.selectbox(key="wf_lifecycle_version").select(newest).run()
    at.button(key="wf_retire").click().run()
    assert _rows(api, "/admin/workflows", name="agent", version=newest)[0]["status"] == "retired"
    at.button(key="wf_activate").click().run()
    assert _rows(api, "/admin/workflows", name="agent", version=newest)[0]["status"] == "active"
    audit = _rows(api, "/admin/audit", entity_type="workflow", entity_id=versions[newest]["id"])
    statuses = [a["after"]["status"] for a in audit if a["action"] == "update"]
    assert statuses[:2] == ["active", "retired"]  # newest first


def test_a_test_run_without_a_runtime_is_refused_on_the_page(api, console) -> None:
    at = _editor(console, "rag")
    _press(at, f"Run version {at.selectbox(key='wf_version').value}")
    assert any(e.startswith("Test run refused: 503") for e in _errors(at)), _errors(at)


def test_the_yaml_view_and_the_panel_are_filled_again_after_visiting_another_page(
    api, console
) -> None:  # noqa: ANN001
    # Streamlit forgets a widget's state while its page is not shown; the editor's own marker of
    # what it filled does not go with it, so on return the YAML view came back empty and the
    # panel's fields at their defaults (an "Apply to node" then wiped the node's params)
    at = open_page(signed_in(console), "workflows.py")  # the first workflow, as a visitor sees it
    node = at.session_state["wf_node"]
    params = at.session_state["wf_p_params"]
    text = at.text_area(key="wf_yaml").value
    assert "nodes:" in text
    open_page(at, "overview.py")
    open_page(at, "workflows.py")
    assert at.session_state["wf_node"] == node
    assert at.text_area(key="wf_yaml").value == text
    assert at.session_state["wf_p_params"] == params


def test_an_unsaved_new_workflow_keeps_its_edits_while_another_workflow_is_shown(
    api, console
) -> None:
    """Showing another workflow (an operator's pick, or a rerun that briefly carried the old
    selection) used to replace the new workflow's draft: picking it again found it gone."""
    at = open_page(signed_in(console), "workflows.py")
    at.text_input(key="wf_new_name").input("kept")
    _press(at, "Start draft")
    at.text_input(key="wf_new_node_id").input("first")
    at.selectbox(key="wf_new_node_kind").select("embed")
    _press(at, "Add node")
    at.selectbox(key="wf_name").select("rag").run()
    assert "kept" in at.selectbox(key="wf_name").options
    at.selectbox(key="wf_name").select("kept").run()
    assert not at.exception, [e.message for e in at.exception]
    assert "first" in at.text_area(key="wf_yaml").value
    assert not _rows(api, "/admin/workflows", name="kept")  # still a draft only
