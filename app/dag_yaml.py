"""The YAML view of the workflow draft: the same draft the canvas edits, as text. A change is
taken when the text area commits (Ctrl+Enter or leaving it); text that is not a YAML mapping
is refused under the text area and the draft stays as it was."""

from __future__ import annotations

import streamlit as st
import yaml

from app import workflow_draft

TEXT, FOR, ERROR = "wf_yaml", "wf_yaml_for", "wf_yaml_error"


def _take() -> None:
    try:
        spec = yaml.safe_load(st.session_state[TEXT])
    except yaml.YAMLError as exc:
        st.session_state[ERROR] = f"not YAML: {exc}"
        return
    if not isinstance(spec, dict):
        st.session_state[ERROR] = "the spec must be a mapping (inputs, outputs, nodes, edges)"
        return
    st.session_state.pop(ERROR, None)
    workflow_draft.replace(spec)


def show(draft: workflow_draft.Draft) -> None:
    marker = (draft.name, draft.base, draft.rev)
    # Streamlit drops a widget's value while its page is not shown; the marker stays, so a
    # missing value is refilled too (else the view came back empty after another page)
    if st.session_state.get(FOR) != marker or TEXT not in st.session_state:
        st.session_state[FOR] = marker
        st.session_state[TEXT] = yaml.safe_dump(draft.spec, sort_keys=False)
    st.text_area("Spec (YAML)", key=TEXT, height=420, on_change=_take)
    if message := st.session_state.get(ERROR):
        st.error(f"YAML refused: {message}", icon=":material/error:")
