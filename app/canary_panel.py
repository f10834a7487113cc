"""A model's canary on the Models and placement page: send a fraction of a model's traffic to
another of its versions, watch each variant (requests, errors, error rate, p99), stop it.

``PUT /admin/models/{name}/canary`` with ``version`` and ``fraction`` (and optionally
``baseline_version``) starts the canary or changes its fraction; ``fraction: 0`` stops it.
``GET`` shows the state and per-variant figures of the running core (503 without a live
runtime). The API's refusal (an unknown version, a baseline to name, a version the runtime
cannot load) is shown under the field it names; nothing changes then.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from app import data, ui
from app.client import ApiError

FORM = "canary"
OTHER = "(its other active version)"
VARIANT_COLUMNS = ["variant", "model_key", "requests", "errors", "error_rate", "p99_s"]


def variants(state: Mapping[str, Any]) -> pd.DataFrame:
    """One row per variant (baseline, canary) of a canary's state as the API reports it."""
    rows = [{"variant": side, **{k: (state.get(side) or {}).get(k) for k in VARIANT_COLUMNS[1:]}}
            for side in ("baseline", "canary") if state.get(side)]  # fmt: skip
    return pd.DataFrame(rows, columns=VARIANT_COLUMNS)


def body(version: str, percent: float, baseline: str) -> dict[str, Any]:
    """The PUT body: ``fraction`` in [0, 1] from a percentage; the baseline only if named."""
    out: dict[str, Any] = {"version": version, "fraction": round(percent / 100.0, 6)}
    if baseline != OTHER:
        out["baseline_version"] = baseline
    return out


def _state(name: str) -> dict[str, Any] | None:
    try:
        return data.client().get(f"/admin/models/{name}/canary")
    except ApiError as err:
        st.info(f"Canary of {name}: {err.detail}", icon=":material/info:")
        return None


def _show(state: Mapping[str, Any]) -> None:
    if state.get("state") == "none":
        st.caption("No canary has run for this model.")
        return
    fraction = state.get("fraction")
    share = "-" if fraction is None else f"{fraction * 100:g}%"
    st.markdown(f"**Canary {state.get('canary_key')}: {state.get('state')}**, {share} of "
                f"{state.get('model_key')}'s runs")  # fmt: skip
    if state.get("reason"):
        st.caption(f"Last change: {state['reason']}")
    st.dataframe(variants(state), hide_index=True, key="canary_variants", column_config={
        "error_rate": st.column_config.NumberColumn(format="%.3f"),
        "p99_s": st.column_config.NumberColumn("p99 (s)", format="%.3f")})  # fmt: skip


def _send(name: str, payload: dict[str, Any], ok: str) -> None:
    ui.attempt(FORM, "PUT", f"/admin/models/{name}/canary", payload, ok=ok)
    st.rerun()


def render(models: list[dict[str, Any]]) -> None:
    """Pick a model; its canary now; the form that sets or stops it."""
    live = [m for m in models if m["status"] != "retired"]
    names = sorted({m["name"] for m in live})
    if not names:
        return
    name = st.selectbox("Canary of model", names, key="cn_model")
    versions = sorted(m["version"] for m in live if m["name"] == name)
    state = _state(name)
    if state is not None:
        _show(state)
    with st.form(FORM):
        c1, c2, c3 = st.columns(3)
        version = c1.selectbox("Canary version", versions, key="cn_version")
        with c1:
            ui.field_error(FORM, "version")
        base = c2.selectbox("Baseline version", [OTHER, *versions], key="cn_baseline")
        with c2:
            ui.field_error(FORM, "baseline_version")
        percent = c3.number_input("Traffic to the canary (%)", min_value=0.0, max_value=100.0,
                                  step=1.0, value=10.0, key="cn_percent")  # fmt: skip
        with c3:
            ui.field_error(FORM, "fraction")
        go = st.form_submit_button("Set canary", key="cn_set", type="primary")
    if go:
        ok = f"Canary of {name}:{version} set to {percent:g}%."
        _send(name, body(version, percent, base), ok)
    running = state is not None and state.get("state") == "running"
    if st.button("Stop the canary", key="cn_stop", disabled=not running, icon=":material/stop:"):
        stop = {"version": str(state.get("canary_key", "")).rpartition(":")[2], "fraction": 0.0,
                "baseline_version": str(state.get("model_key", "")).rpartition(":")[2]}  # fmt: skip
        _send(name, stop, f"Canary of {name} stopped.")
    ui.form_error(FORM)
