"""Fair share, live: each tenant's share of service received versus entitled over the last
minutes and its waiting steps (the gateway's own history, refreshing every second), who is
borrowing and who was preempted, a demo burst to watch them under contention, and why any
waiting request waits, in the core's words."""

from __future__ import annotations

import streamlit as st

from app import data, fair_history, transforms, ui
from app.burst_panel import burst_panel
from app.client import ApiError

ui.page_title(
    "Fair share, live",
    "Each tenant's received versus entitled share as it happens, who waits, borrows or was preempted; a demo burst shows contention.",
)
WINDOW_MIN = 5  # minutes of history shown


@st.fragment(run_every=data.settings().live_refresh_s)
def live_panel() -> None:
    try:
        snap = data.live_snapshot()
        history = data.client().get("/admin/fair-share/history", minutes=WINDOW_MIN)
    except data.ApiError as err:
        st.info(f"Live figures unavailable: {err.detail}")
        return
    standing = transforms.tenant_standing(snap)
    tenancy = snap.get("tenancy") or {}
    st.caption(f"Policy: {tenancy.get('policy', '?')} · least served: "
               f"{tenancy.get('least_served') or 'none'} · "
               f"{len(snap.get('runs', []))} run(s) in flight · "
               f"{snap.get('counters', {}).get('runs.started', 0)} runs started · "
               f"sampled every {history['every_s']:g} s")  # fmt: skip
    frame = fair_history.history_frame(history["samples"])
    left, right = st.columns(2)
    left.plotly_chart(fair_history.share_lines(frame), key="fair_shares")
    right.plotly_chart(fair_history.queue_lines(frame), key="fair_queue")
    now = fair_history.standing(frame).set_index("tenant")
    standing["borrowing"] = standing["tenant"].map(now["borrowing"]).fillna(False).astype(bool)
    standing["preempted_in_window"] = (
        standing["tenant"].map(now["preempted_in_window"]).fillna(0).astype(int))  # fmt: skip
    st.dataframe(standing, hide_index=True, key="fair_table", column_config={
        "share_received": st.column_config.NumberColumn("received (all time)", format="percent"),
        "share_entitled": st.column_config.NumberColumn("entitled", format="percent")})  # fmt: skip
    st.session_state["fair_tenants"] = list(standing["tenant"])
    st.session_state["fair_snapshot"] = snap


def why_waiting(snap: dict) -> None:
    """A select of the waiting requests (optionally of one tenant) and the core's reasons."""
    st.header("Why is this waiting?")
    tenants = st.session_state.get("fair_tenants", [])
    who = st.selectbox("Tenant", [None, *tenants], key="why_tenant",
                       format_func=lambda t: "every tenant" if t is None else t)  # fmt: skip
    reasons = transforms.waiting_reasons(snap, who)
    summary = {t["tenant"]: t["explanations"] for t in snap.get("tenants", [])}
    for line in summary.get(who, []) if who else []:
        st.info(line)
    if reasons.empty:
        st.success("Nothing is waiting" + (f" for {who}." if who else "."))
        return
    request = st.selectbox("Request", [None, *reasons["request_id"].unique()], key="why_request",
                           format_func=lambda r: "all waiting steps" if r is None else r)  # fmt: skip
    shown = reasons if request is None else reasons[reasons["request_id"] == request]
    if request is not None:
        for why in shown["why"].unique():
            st.info(why)
    st.dataframe(shown, hide_index=True, key="why_table")


live_panel()
try:
    names = sorted(t["name"] for t in data.items("/admin/tenants") if t.get("status") == "active")
except ApiError:
    names = list(st.session_state.get("fair_tenants", []))
burst_panel(names)
snap = st.session_state.get("fair_snapshot")
if snap is not None:
    why_waiting(snap)
