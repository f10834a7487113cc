"""A test run of a saved workflow version from the editor, through the admin's test-run
route (audited, billed to the tenant it runs as): its outputs and, per node, when it ended,
its device time, tokens, batch and replica device."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from app import data
from app.client import ApiError

RESULT, ERROR = "wf_run_result", "wf_run_error"
NODE_COLUMNS = ["node", "model", "device", "attempt", "done_ms", "device_ms", "input_tokens",
                "output_tokens", "batch_size"]  # fmt: skip


def node_timings(run: Mapping[str, Any]) -> pd.DataFrame:
    """One row per node of a finished run, in the order the nodes ended."""
    rows = [{"node": node, **figures} for node, figures in (run.get("nodes") or {}).items()]
    frame = pd.DataFrame(rows).reindex(columns=NODE_COLUMNS)
    return frame.sort_values("done_ms", na_position="last", kind="stable")


def show(name: str, version: str | None, inputs: Mapping[str, Any]) -> None:
    if version is None:
        st.caption("Save the draft first: a test run runs a saved version.")
        return
    tenants = {t["id"]: t["name"] for t in data.items("/admin/tenants", status="active")}
    with st.form("wf_run"):
        tenant = st.selectbox("As tenant", list(tenants), format_func=tenants.get,
                              key="wf_tenant")  # fmt: skip
        sample = {k: "What does the reranker do?" for k in inputs}
        text = st.text_area("Inputs (JSON)", json.dumps(sample), key="wf_inputs")
        go = st.form_submit_button(f"Run version {version}")
    if go:
        st.session_state.pop(RESULT, None)
        try:
            body = {"tenant_id": tenant, "inputs": json.loads(text), "mode": "sync"}
            path = f"/admin/workflows/{name}/versions/{version}/test-runs"
            st.session_state[RESULT] = data.mutate("POST", path, body)
            st.session_state.pop(ERROR, None)
        except ApiError as exc:
            st.session_state[ERROR] = f"{exc.status} {exc.error}: {exc.detail}"
        except ValueError as exc:
            st.session_state[ERROR] = f"inputs: not JSON ({exc})"
    if message := st.session_state.get(ERROR):
        st.error(f"Test run refused: {message}")
    if run := st.session_state.get(RESULT):
        st.write(
            f"Run {run['id']}: **{run['status']}**"
            + (f" — {run['error']}" if run.get("error") else "")
        )
        st.json(run.get("outputs") or {}, expanded=2)
        st.caption("Per node: when it ended (ms after the run was accepted), device time, tokens")
        st.dataframe(node_timings(run), hide_index=True, key="wf_run_nodes")
