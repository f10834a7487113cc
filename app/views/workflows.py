"""Workflows: a visual DAG editor. The draft is drawn on a canvas (left to right; drag to
connect, right-click to delete) beside a side panel for the selected node and the YAML view
of the same draft; the API's validation problems are shown on the nodes while editing. Save
as a new version, start a workflow blank or from a template, activate, retire and diff
versions, and test-run a saved version with per-node timings."""

from __future__ import annotations

import streamlit as st

from app import dag_canvas, dag_graph, dag_panel, dag_yaml, data, ui, workflow_draft, workflow_trial
from app import workflow_versions as wv
from app.client import ApiError

ui.page_title(
    "Workflows",
    "Draw and edit a workflow's DAG, save it as a new version, activate, retire or compare versions, and test-run it.",
)
try:
    flows = [w for w in data.items("/admin/workflows") if not w["name"].startswith("model.")]
    models = [f"{m['name']}:{m['version']}" for m in data.items("/admin/models")
              if m.get("status") != "retired"]  # fmt: skip
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()
names = sorted({w["name"] for w in flows})
wv.new_workflow(names)
unsaved = workflow_draft.unsaved_names(names)
if not names + unsaved:
    st.info("No workflows yet: start one above.")
    st.stop()
if pending := st.session_state.pop(wv.PENDING, None):
    st.session_state["wf_name"] = pending[0]
    st.session_state.pop("wf_version", None)
    if pending[1]:
        st.session_state["wf_version"] = pending[1]
c1, c2 = st.columns(2)
name = c1.selectbox("Workflow", names + unsaved, key="wf_name")
versions = [w for w in flows if w["name"] == name]
chosen = None
if versions:
    chosen = c2.selectbox("Version", [w["version"] for w in versions], index=len(versions) - 1,
                          key="wf_version")  # fmt: skip
    flow = next(w for w in versions if w["version"] == chosen)
    draft = workflow_draft.load(name, chosen, flow["spec"])
    c2.caption(f"Status: {flow['status']} · the editor's draft starts from this version")
else:
    draft = workflow_draft.resume(name)
    c2.caption("Not saved yet: save the draft to make version 1.")

report = workflow_draft.report(draft)
problems = dag_graph.problems_on_nodes(draft.spec, report["problems"])
canvas, side = st.columns([3, 2])
with canvas:
    dag_canvas.show(draft, problems)
    if report["valid"]:
        st.success("The draft is valid.", icon=":material/check:")
    for owner, messages in problems.items():
        for message in messages:
            st.error(f"{owner}: {message}", icon=":material/warning:")
    wv.save(draft, versions)
with side:
    tab_node, tab_yaml = st.tabs(["Node", "YAML"])
    with tab_node:
        dag_panel.show(draft, problems, models)
    with tab_yaml:
        dag_yaml.show(draft)

if versions:
    st.header("Versions")
    wv.lifecycle(versions)
    wv.diff(draft, versions)
st.header("Test run")
workflow_trial.show(name, chosen, draft.spec.get("inputs") or {})
