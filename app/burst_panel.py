"""The fair-share page's demo-burst panel: start a bounded burst of one tenant's runs, see the
running and recent bursts with their counts, stop one early. Every refusal of the API is shown
under the field it names (a rate or duration above the gateway's caps); when bursts are off on
the gateway, the API's sentence saying how to turn them on is shown instead of the form."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import data, ui
from app.client import ApiError

FORM = "burst"
BURST_COLUMNS = ["id", "tenant", "workflow", "state", "rate_per_s", "duration_s", "sent",
                 "accepted", "refused", "last_refusal"]  # fmt: skip


def _bursts() -> list[dict] | None:
    """The gateway's bursts, or None after saying why there are none to show."""
    try:
        return data.client().get("/admin/demo/bursts")
    except ApiError as err:
        st.info(err.detail)
        return None


def _workflows() -> list[str]:
    try:
        rows = data.items("/admin/workflows")
    except ApiError:
        return []
    return sorted(f"{w['name']}:{w['version']}" for w in rows if w.get("status") == "active")


def start_form(tenants: list[str]) -> None:
    """Tenant, workflow, rate and duration; the API checks the bounds."""
    with st.form(FORM):
        left, mid = st.columns(2)
        tenant = left.selectbox("Tenant", tenants, key="burst_tenant")
        ui.field_error(FORM, "tenant")
        workflow = mid.selectbox("Workflow", _workflows(), key="burst_workflow")
        ui.field_error(FORM, "workflow")
        rate = left.number_input("Runs per second", min_value=0.1, value=5.0, step=1.0,
                                 key="burst_rate")  # fmt: skip
        ui.field_error(FORM, "rate_per_s")
        duration = mid.number_input("Duration (s)", min_value=1.0, value=20.0, step=5.0,
                                    key="burst_duration")  # fmt: skip
        ui.field_error(FORM, "duration_s")
        if st.form_submit_button("Start burst"):
            body = {"tenant": tenant, "workflow": workflow, "rate_per_s": float(rate),
                    "duration_s": float(duration)}  # fmt: skip
            started = ui.attempt(FORM, "POST", "/admin/demo/bursts", body)
            if started is not None:
                ui.remember(FORM, None, f"Started {started['id']}: {started['tenant']} at "
                                        f"{started['rate_per_s']:g}/s for {started['duration_s']:g} s")  # fmt: skip
            st.rerun()
    ui.form_error(FORM)


def burst_panel(tenants: list[str]) -> None:
    """The whole panel (nothing but the API's notice when bursts are off)."""
    st.header("Demo burst")
    if _bursts() is None:
        return
    start_form(tenants)
    burst_list()


@st.fragment(run_every=data.settings().live_refresh_s)
def burst_list() -> None:
    """Running and recent bursts with their counts (refreshing), and a stop button."""
    bursts = _bursts() or []
    if not bursts:
        return
    st.dataframe(pd.DataFrame(bursts).reindex(columns=BURST_COLUMNS), hide_index=True,
                 key="burst_table")  # fmt: skip
    running = [b["id"] for b in bursts if b["state"] == "running"]
    if running:
        left, right = st.columns([3, 1])
        chosen = left.selectbox("Running burst", running, key="burst_stop_id")
        if right.button("Stop burst", key="burst_stop"):
            ui.attempt(
                "burst_stop", "DELETE", f"/admin/demo/bursts/{chosen}", ok=f"Stopped {chosen}"
            )
            st.rerun(scope="app")
    ui.form_error("burst_stop")
