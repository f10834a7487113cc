"""Workflows: a Plotly graph beside editable node and edge tables, a YAML view, validation
problems shown on the node they concern, versions kept (a change saves a new version), and a
test run with sample input."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st
import yaml

from app import charts, data, transforms, ui
from app.client import ApiError

st.title("Workflows")
try:
    flows = [w for w in data.items("/admin/workflows") if w["status"] != "retired"]
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()
names = sorted({w["name"] for w in flows if not w["name"].startswith("model.")})
if not names:
    st.info("No workflows yet.")
    st.stop()
if pending := st.session_state.pop("wf_pending_version", None):
    st.session_state["wf_version"] = pending
c1, c2 = st.columns(2)
name = c1.selectbox("Workflow", names, key="wf_name")
versions = [w for w in flows if w["name"] == name]
chosen = c2.selectbox("Version", [w["version"] for w in versions], index=len(versions) - 1,
                      key="wf_version")  # fmt: skip
flow = next(w for w in versions if w["version"] == chosen)
st.caption(f"Status: {flow['status']} · versions kept: {', '.join(w['version'] for w in versions)}")

FORM = "workflow"
err = ui.error_of(FORM)
problems = transforms.problems_by_node(
    [{"location": p.location, "message": p.message} for p in err.problems] if err else [],
    [str(n.get("id")) for n in flow["spec"].get("nodes", [])],
)
graph, forms = st.columns([1, 1])
graph.plotly_chart(charts.dag_figure(flow["spec"], problems), key="wf_graph")
with forms:
    tab_nodes, tab_yaml = st.tabs(["Nodes and edges", "YAML"])
with tab_nodes:
    nodes = st.data_editor(transforms.nodes_frame(flow["spec"]), key="wf_nodes",
                           num_rows="dynamic", hide_index=True)  # fmt: skip
    for node, messages in problems.items():
        for message in messages:
            st.error(f"{node}: {message}")
    edges = st.data_editor(transforms.edges_frame(flow["spec"]), key="wf_edges",
                           num_rows="dynamic", hide_index=True)  # fmt: skip
with tab_yaml:
    text = st.text_area("Spec (YAML)", yaml.safe_dump(flow["spec"], sort_keys=False),
                        height=360, key=f"wf_yaml_{flow['id']}")  # fmt: skip
    use_yaml = st.checkbox("Save the YAML instead of the tables", key="wf_use_yaml")

try:
    spec = (
        yaml.safe_load(text)
        if use_yaml
        else transforms.spec_from_frames(flow["spec"], nodes, edges)
    )
except (yaml.YAMLError, transforms.SpecTableError) as exc:
    st.error(f"Cannot read the edit: {exc}")
    st.stop()
next_version = transforms.next_version([w["version"] for w in versions])
b1, b2 = st.columns(2)
if b1.button("Validate", key="wf_validate"):
    try:
        report = data.client().post("/admin/workflows/validate", {"spec": spec})
        st.session_state["wf_report"] = report
    except ApiError as exc:
        st.session_state["wf_report"] = {"valid": False, "problems": [
            {"location": p.location, "message": p.message} for p in exc.problems] or
            [{"location": "spec", "message": exc.detail}]}  # fmt: skip
if report := st.session_state.get("wf_report"):
    if report["valid"]:
        st.success("The spec is valid.")
    for p in report["problems"]:
        st.error(f"{p['location']}: {p['message']}")
if b2.button(f"Save as version {next_version}", key="wf_save", type="primary"):
    st.session_state.pop("wf_report", None)
    body = {"name": name, "version": next_version, "spec": spec, "status": flow["status"]}
    if ui.attempt(FORM, "POST", "/admin/workflows", body,
                  ok=f"Saved {name} version {next_version}."):  # fmt: skip
        st.session_state["wf_pending_version"] = next_version
    st.rerun()
ui.form_error(FORM)

st.header("Test run")
tenants = {t["id"]: t["name"] for t in data.items("/admin/tenants", status="active")}
with st.form("wf_run"):
    tenant = st.selectbox("As tenant", list(tenants), format_func=tenants.get, key="wf_tenant")
    sample = {k: "What does the reranker do?" for k in flow["spec"].get("inputs", {})}
    inputs = st.text_area("Inputs (JSON)", json.dumps(sample), key="wf_inputs")
    go = st.form_submit_button("Run")
if go:
    try:
        run = data.run_as_tenant(tenant, name, chosen, json.loads(inputs))
        st.session_state["wf_run_result"] = run
    except (ApiError, ValueError) as exc:
        st.error(f"Test run refused: {exc}")
if run := st.session_state.get("wf_run_result"):
    st.write(f"Run {run['id']}: **{run['status']}**")
    st.json(run.get("outputs") or {}, expanded=2)
    steps = pd.DataFrame(
        run.get("nodes", []),
        columns=["node_id", "attempt", "input_tokens", "output_tokens", "device_ms", "cost_units"],
    )
    st.caption("Per node: tokens and device time from the usage ledger")
    st.dataframe(steps, hide_index=True, key="wf_run_nodes")
