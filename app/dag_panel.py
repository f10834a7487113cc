"""The side panel of the workflow editor: add a node, and edit the selected one (task or tool,
model, params, timeout, retries, join, ``map_over``, its dependencies and the router label
``when`` on the edges into it) or delete it.

Panel widgets keep stable keys (``wf_p_<field>``) and are reset from the draft whenever the
selected node or the draft's revision changes. An edit the draft refuses (a bad id, params
that are not a mapping) is shown under the field it concerns and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from app import dag_edit, workflow_draft
from app.dag_edit import DraftError
from app.dag_graph import INPUT, TASKS, TOOLS, kind_of

NODE, ERRORS, FOR = "wf_node", "wf_panel_errors", "wf_panel_for"
KINDS = TASKS + TOOLS
_FIELDS = ("kind", "model", "params", "timeout_s", "retries", "join", "map_over", "when",
           "depends_on")  # fmt: skip


def _field_error(field: str) -> None:
    if message := st.session_state.get(ERRORS, {}).get(field):
        st.error(f"{field}: {message}", icon=":material/error:")


def _refuse(err: DraftError) -> None:
    st.session_state[ERRORS] = {err.field: err.message}


def add_form(draft: workflow_draft.Draft) -> None:
    """A new, unconnected node (connect it on the canvas or with its dependencies)."""
    with st.form("wf_add_node", border=False):
        c1, c2 = st.columns(2)
        new_id = c1.text_input("New node id", key="wf_new_node_id")
        kind = c2.selectbox("Runs", KINDS, key="wf_new_node_kind")
        _field_error("id")
        if st.form_submit_button("Add node"):
            try:
                spec = dag_edit.add_node(draft.spec, new_id, kind)
            except DraftError as err:
                _refuse(err)
                st.rerun()
            st.session_state.pop(ERRORS, None)
            st.session_state[NODE] = new_id.strip()
            workflow_draft.replace(spec)
            st.rerun()


def _reset_widgets(draft: workflow_draft.Draft, node: Mapping[str, Any]) -> None:
    """Fill the panel's widgets from ``node`` when the node or the draft revision changed."""
    marker = (node.get("id"), draft.rev)
    filled = all(f"wf_p_{field}" in st.session_state for field in _FIELDS)
    if st.session_state.get(FOR) == marker and filled:  # refill what another page dropped
        return
    st.session_state[FOR] = marker
    nid = str(node.get("id"))
    into = [e for e in draft.spec.get("edges") or [] if str(e.get("to", "")).startswith(nid + ".")]
    values = {
        "kind": kind_of(node) or KINDS[0], "model": str(node.get("model") or ""),
        "params": dag_edit.params_text(node), "timeout_s": float(node.get("timeout_s") or 0),
        "retries": int(node.get("retries") or 0), "join": str(node.get("join") or "all"),
        "map_over": str(node.get("map_over") or ""),
        "when": next((str(e["when"]) for e in into if e.get("when")), ""),
        "depends_on": dag_edit.incoming(draft.spec, nid),
    }  # fmt: skip
    for field in _FIELDS:
        st.session_state[f"wf_p_{field}"] = values[field]


def _edited(draft: workflow_draft.Draft, nid: str) -> dict[str, Any]:
    """The draft with the panel's values applied to ``nid`` (DraftError when refused)."""
    s = st.session_state
    timeout = float(s["wf_p_timeout_s"])
    fields = {"kind": s["wf_p_kind"], "model": s["wf_p_model"] if s["wf_p_kind"] in TASKS else "",
              "params": dag_edit.parse_params(s["wf_p_params"]),
              "timeout_s": (int(timeout) if timeout.is_integer() else timeout) or None,
              "retries": int(s["wf_p_retries"]) or None,
              "join": None if s["wf_p_join"] == "all" else s["wf_p_join"],
              "map_over": s["wf_p_map_over"].strip()}  # fmt: skip
    spec = dag_edit.update_node(draft.spec, nid, fields)
    spec = dag_edit.set_dependencies(spec, nid, s["wf_p_depends_on"])
    return dag_edit.set_when(spec, nid, s["wf_p_when"])


def _node_form(draft: workflow_draft.Draft, node: Mapping[str, Any], models: Sequence[str]) -> None:
    nid = str(node.get("id"))
    others = [INPUT] + [i for i in dag_edit.node_ids(draft.spec) if i != nid]
    current = str(node.get("model") or "")
    with st.form("wf_node_form", border=False):
        c1, c2 = st.columns(2)
        c1.selectbox("Task or tool", KINDS, key="wf_p_kind")
        c2.selectbox("Model (for a task)", ["", *sorted({*models, current} - {""})],
                     key="wf_p_model")  # fmt: skip
        st.text_area("Params (JSON or YAML)", key="wf_p_params", height=90)
        _field_error("params")
        c1, c2, c3 = st.columns(3)
        c1.number_input("Timeout (s, 0: none)", min_value=0.0, step=1.0, key="wf_p_timeout_s")
        c2.number_input("Retries", min_value=0, max_value=10, step=1, key="wf_p_retries")
        c3.selectbox("Join", ["all", "any"], key="wf_p_join")
        c1, c2 = st.columns(2)
        c1.text_input("map_over (input field split in parallel)", key="wf_p_map_over")
        c2.text_input("when (router label on edges into it)", key="wf_p_when")
        st.multiselect("Depends on", others, key="wf_p_depends_on")
        _field_error("depends_on")
        if st.form_submit_button("Apply to node", type="primary"):
            try:
                spec = _edited(draft, nid)
            except DraftError as err:
                _refuse(err)
                st.rerun()
            st.session_state.pop(ERRORS, None)
            workflow_draft.replace(spec)
            st.rerun()


def show(draft: workflow_draft.Draft, problems: Mapping[str, Sequence[str]],
         models: Sequence[str]) -> None:  # fmt: skip
    """The panel for the node selected on the canvas (or picked here)."""
    add_form(draft)
    ids = dag_edit.node_ids(draft.spec)
    if not ids:
        st.info("No nodes yet: add one above, then connect it on the canvas.")
        return
    if st.session_state.get(NODE) not in ids:
        st.session_state[NODE] = ids[0]
    nid = st.selectbox("Selected node (or click one on the canvas)", ids, key=NODE)
    for message in problems.get(nid, ()):
        st.error(message, icon=":material/warning:")
    node = next(n for n in draft.spec["nodes"] if str(n.get("id")) == nid)
    _reset_widgets(draft, node)
    _node_form(draft, node, models)
    if st.button(f"Delete node {nid}", key="wf_delete_node"):
        st.session_state.pop(NODE, None)
        workflow_draft.replace(dag_edit.remove_node(draft.spec, nid))
        st.rerun()
