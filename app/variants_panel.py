"""Precision variants of the Models and placement page: each model's variants with their
measured memory, load time and quality, flagged where the quality is below the exact floor;
a form registers a variant and another retires one, through the admin API.

Everything shown comes from ``GET /admin/models/{id}/variants`` (the floor included, as
``exact_floor``). A refused registration (the base's fp32, a precision the executor cannot run,
a duplicate) shows the API's message under the precision field and changes nothing.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app import data, ui

ADD, RETIRE = "variant_add", "variant_retire"
PRECISIONS = ["bf16", "fp16", "int8", "int4", "fp8", "fp32"]  # the API judges each one
COLUMNS = ["precision", "status", "memory_mib", "load_time_ms", "metric", "score", "mean",
           "min", "inputs", "measured_at", "below_exact_floor"]  # fmt: skip


def variant_rows(items: list[dict[str, Any]], floor: float) -> list[dict[str, Any]]:
    """One table row per variant: its measurements flattened, and whether its quality score is
    below ``floor`` (None while it is unmeasured: no score, no verdict)."""
    rows = []
    for v in items:
        q = v.get("quality") or {}
        score = q.get("score")
        rows.append({
            "precision": v["precision"], "status": v["status"], "memory_mib": v["memory_mib"],
            "load_time_ms": v["load_time_ms"], "metric": q.get("metric"), "score": score,
            "mean": q.get("mean"), "min": q.get("min"), "inputs": q.get("inputs"),
            "measured_at": v.get("quality_measured_at"),
            "below_exact_floor": None if score is None else score < floor,
        })  # fmt: skip
    return rows


def render(models: list[dict[str, Any]]) -> None:
    """The variants of one picked model, and the forms that change them."""
    live = {m["id"]: m for m in models if m["status"] != "retired"}
    if not live:
        return
    pick = st.selectbox("Model", list(live), key="mv_pick",
                        format_func=lambda i: f"{live[i]['name']}:{live[i]['version']}")  # fmt: skip
    path = f"/admin/models/{pick}/variants"
    found = data.one(path, include_retired=True)
    floor = found["exact_floor"]
    rows = variant_rows(found["items"], floor)
    st.caption(f"Quality against the fp32 base on fixed inputs (`legato profile --variants`); "
               f"below the exact floor {floor} a variant serves no exact traffic.")  # fmt: skip
    st.dataframe(pd.DataFrame(rows, columns=COLUMNS), hide_index=True, key="variants_table",
                 column_config={"below_exact_floor": st.column_config.CheckboxColumn(
                     "below the exact floor")})  # fmt: skip
    for row in rows:
        if row["below_exact_floor"] and row["status"] == "active":
            st.warning(f"{row['precision']}: {row['metric']} {row['score']:.4f} is below the "
                       f"exact floor {floor}: refused for exact traffic.")  # fmt: skip
    left, right = st.columns(2)
    with left.form(ADD):
        precision = st.selectbox("Precision", PRECISIONS, key=f"mv_precision_{pick}")
        ui.field_error(ADD, "precision")
        added = st.form_submit_button("Register variant", key="mv_add")
    active = [r["precision"] for r in rows if r["status"] == "active"]
    with right.form(RETIRE):
        gone = st.selectbox("Active variant", active, key=f"mv_retire_{pick}")
        retired = st.form_submit_button("Retire variant", key="mv_retire", disabled=not active)
    if added:
        ui.attempt(ADD, "POST", path, {"precision": precision},
                   ok=f"Variant {precision} registered; measure it with legato profile.")  # fmt: skip
        st.rerun()
    if retired and gone:
        ui.attempt(RETIRE, "DELETE", f"{path}/{gone}", ok=f"Variant {gone} retired.")
        st.rerun()
    ui.form_error(ADD)
    ui.form_error(RETIRE)
