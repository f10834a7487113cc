"""The models editor of the Models and placement page: every model with its batch settings, and
a form that changes one model's batch limits and batching mode through the admin API.

Only the fields the operator changed are sent. The API judges the change (continuous batching
is for generate models only, chunked prefill only with continuous batching); its refusal is
shown next to the field it names and nothing here pretends the change happened.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app import ui

FORM = "model_edit"
COLUMNS = ["id", "name", "version", "task", "status", "memory_mib", "max_batch_size",
           "max_batch_tokens", "tp_degree", "continuous_batching",
           "prefill_chunk_tokens"]  # fmt: skip
CONTINUOUS = "Continuous batching (LLM joins running decode loop)"
CONTINUOUS_HELP = (
    "Generate models only. New requests join the running decode loop instead of waiting for "
    "the batch to end: better on GPU engines (vLLM-like); on a CPU each join's prefill re-reads "
    "the weights and static batches serve more."
)

CHUNK = "Prefill chunk tokens (0: off)"
CHUNK_HELP = (
    "With continuous batching: each decode-loop iteration carries the running answers' tokens "
    "and at most this many tokens in all, the rest going to waiting prompts in chunks, so a "
    "long prompt no longer stalls the answers already decoding. 512 is a common latency "
    "setting; each chunk is a forward of its own, so a prompt costs somewhat more in total."
)


def changes(model: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``wanted`` whose value differs from ``model`` (the PATCH body)."""
    return {k: v for k, v in wanted.items() if model.get(k) != v}


def render(models: list[dict[str, Any]]) -> None:
    """The models table and the editor of one model (retired models are shown, not edited)."""
    frame = pd.DataFrame(models, columns=COLUMNS)
    st.dataframe(frame, hide_index=True, key="models_table", column_config={
        "continuous_batching": st.column_config.CheckboxColumn("continuous batching")})  # fmt: skip
    editable = {m["id"]: m for m in models if m["status"] != "retired"}
    if not editable:
        st.info("No model to edit: every model is retired.")
        return
    pick = st.selectbox("Model to edit", list(editable), key="me_pick",
                        format_func=lambda i: f"{editable[i]['name']}:{editable[i]['version']} "
                                              f"({editable[i]['task']})")  # fmt: skip
    model = editable[pick]
    # keys carry the model id, so each model's fields start from its own stored values
    with st.form(FORM):
        left, right = st.columns(2)
        size = left.number_input("Max batch size", min_value=1, step=1, key=f"me_size_{pick}",
                                 value=int(model["max_batch_size"]))  # fmt: skip
        with left:
            ui.field_error(FORM, "max_batch_size")
        tokens = right.number_input("Max batch tokens", min_value=1, step=1,
                                    key=f"me_tokens_{pick}",
                                    value=int(model["max_batch_tokens"]))  # fmt: skip
        with right:
            ui.field_error(FORM, "max_batch_tokens")
        continuous = st.checkbox(CONTINUOUS, value=bool(model["continuous_batching"]),
                                 key=f"me_continuous_{pick}", help=CONTINUOUS_HELP)  # fmt: skip
        ui.field_error(FORM, "continuous_batching")
        chunk = st.number_input(CHUNK, min_value=0, step=64, key=f"me_chunk_{pick}",
                                value=int(model.get("prefill_chunk_tokens") or 0),
                                help=CHUNK_HELP)  # fmt: skip
        ui.field_error(FORM, "prefill_chunk_tokens")
        saved = st.form_submit_button("Save model", key="me_save", type="primary")
    if saved:
        body = changes(model, {"max_batch_size": int(size), "max_batch_tokens": int(tokens),
                               "continuous_batching": bool(continuous),
                               "prefill_chunk_tokens": int(chunk)})  # fmt: skip
        name = f"{model['name']}:{model['version']}"
        if body:
            ui.attempt(FORM, "PATCH", f"/admin/models/{pick}", body, ok=f"Model {name} saved.")
        else:
            ui.remember(FORM, None, f"Model {name}: nothing changed.")
        st.rerun()  # fresh values on success; the refusal next to its field otherwise
    ui.form_error(FORM)
