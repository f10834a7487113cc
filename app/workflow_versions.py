"""Workflow versions on the console: start a new workflow (blank or from a template), save
the draft as the next version, activate or retire a version (PATCH of its status: the API
audits it and the live core starts or stops serving it), and diff two versions or the draft.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from app import dag_diff, transforms, ui, workflow_draft, workflow_templates
from app.workflow_draft import Draft

FORM, NEW_ERROR, PENDING = "workflow", "wf_new_error", "wf_pending"
DRAFT_LABEL = "(draft)"


def new_workflow(names: Sequence[str]) -> None:
    """Name and template of a new workflow; it stays an unsaved draft until saved."""
    with st.expander("New workflow", expanded=bool(st.session_state.get(NEW_ERROR))):
        with st.form("wf_new", border=False):
            c1, c2 = st.columns(2)
            name = c1.text_input("Name", key="wf_new_name")
            template = c2.selectbox("Start from", list(workflow_templates.TEMPLATES),
                                    key="wf_new_template")  # fmt: skip
            if message := st.session_state.get(NEW_ERROR):
                st.error(f"Name: {message}", icon=":material/error:")
            if st.form_submit_button("Start draft"):
                _start(name.strip(), template, names)


def _start(name: str, template: str, names: Sequence[str]) -> None:
    if not name or name.startswith("model.") or len(name) > 200:
        st.session_state[NEW_ERROR] = "1 to 200 characters, not starting with 'model.'"
    elif name in names:
        st.session_state[NEW_ERROR] = f"a workflow {name!r} exists; pick it above instead"
    else:
        st.session_state.pop(NEW_ERROR, None)
        found = workflow_draft.current()
        rev = found.rev + 1 if found is not None else 1
        workflow_draft.start(
            workflow_draft.Draft(name, None, workflow_templates.from_template(template, name), rev)
        )
        st.session_state[PENDING] = (name, None)
    st.rerun()


def save(draft: Draft, versions: Sequence[Mapping[str, Any]]) -> None:
    """Save the draft as the next version (status of its base version; new: draft)."""
    nxt = transforms.next_version([w["version"] for w in versions])
    base = next((w for w in versions if w["version"] == draft.base), None)
    status = base["status"] if base else "draft"
    if st.button(f"Save as version {nxt}", key="wf_save", type="primary"):
        body = {"name": draft.name, "version": nxt, "spec": draft.spec, "status": status}
        if ui.attempt(FORM, "POST", "/admin/workflows", body,
                      ok=f"Saved {draft.name} version {nxt} ({status})."):  # fmt: skip
            st.session_state[PENDING] = (draft.name, nxt)
        st.rerun()
    err = ui.error_of(FORM)
    ui.form_error(FORM)
    for p in err.problems if err else ():
        st.error(f"{p.location}: {p.message}")


def _set_status(flow: Mapping[str, Any], status: str) -> None:
    verb = {"active": "Activated", "retired": "Retired"}[status]
    ui.attempt("wf_versions", "PATCH", f"/admin/workflows/{flow['id']}", {"status": status},
               ok=f"{verb} {flow['name']} version {flow['version']}.")  # fmt: skip
    st.rerun()


def lifecycle(versions: Sequence[Mapping[str, Any]]) -> None:
    """Every version with its status; activate or retire the picked one."""
    st.dataframe(pd.DataFrame(versions, columns=["version", "status", "created_at"]),
                 hide_index=True, key="wf_versions_table")  # fmt: skip
    c1, c2, c3 = st.columns([2, 1, 1])
    picked = c1.selectbox("Version to change", [w["version"] for w in versions],
                          index=len(versions) - 1, key="wf_lifecycle_version")  # fmt: skip
    flow = next(w for w in versions if w["version"] == picked)
    if c2.button("Activate", key="wf_activate", disabled=flow["status"] == "active"):
        _set_status(flow, "active")
    if c3.button("Retire", key="wf_retire", disabled=flow["status"] == "retired"):
        _set_status(flow, "retired")
    ui.form_error("wf_versions")


def diff(draft: Draft, versions: Sequence[Mapping[str, Any]]) -> None:
    """What changed from one version (or the draft) to another."""
    specs = {w["version"]: w["spec"] for w in versions} | {DRAFT_LABEL: draft.spec}
    labels = list(specs)
    c1, c2 = st.columns(2)
    old = c1.selectbox("From", labels, index=max(len(labels) - 2, 0), key="wf_diff_from")
    new = c2.selectbox("To", labels, index=len(labels) - 1, key="wf_diff_to")
    rows = dag_diff.diff_specs(specs[old], specs[new])
    if not rows:
        st.caption(f"{old} and {new} are the same workflow.")
        return
    st.dataframe(pd.DataFrame(rows, columns=dag_diff.COLUMNS), hide_index=True, key="wf_diff")
