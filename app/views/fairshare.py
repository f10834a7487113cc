"""Fair share, live: per-tenant virtual counters, service rate, share received versus entitled,
queue depth over time (refreshing every second), and why a tenant's or a request's work waits,
from the core's own explanations."""

from __future__ import annotations

import streamlit as st

from app import charts, data, transforms

st.title("Fair share, live")
HISTORY = 120  # samples kept (two minutes at one per second)


def _sample(snap: dict, standing) -> None:
    """Append one sample of counters and queue depth to the session's rolling history."""
    history = st.session_state.setdefault("fair_history", [])
    history.append({
        "t": round(snap["now"], 2), "now": snap["now"],
        "counters": dict(zip(standing["tenant"], standing["counter_milli"] * standing["weight"],
                             strict=True)),
        "queued": dict(zip(standing["tenant"], standing["waiting_steps"], strict=True)),
    })  # fmt: skip
    del history[:-HISTORY]


@st.fragment(run_every=data.settings().live_refresh_s)
def live_panel() -> None:
    try:
        snap = data.live_snapshot()
    except data.ApiError as err:
        st.info(f"Live figures unavailable: {err.detail}")
        return
    standing = transforms.tenant_standing(snap)
    # waiting work as the core's views show it: replica queues plus pending (unbound) steps
    waiting = transforms.waiting_counts(snap).set_index("tenant")
    standing["waiting_steps"] = standing["tenant"].map(waiting["total"]).fillna(0).astype(int)
    standing["pending_steps"] = standing["tenant"].map(waiting["pending"]).fillna(0).astype(int)
    _sample(snap, standing)
    history = st.session_state["fair_history"]
    rates = transforms.service_rates(history[-10:])
    standing["service_rate"] = standing["tenant"].map(rates).fillna(0.0)
    tenancy = snap.get("tenancy") or {}
    st.caption(f"Policy: {tenancy.get('policy', '?')} · least served: "
               f"{tenancy.get('least_served') or 'none'} · "
               f"{len(snap.get('runs', []))} run(s) in flight · "
               f"{snap.get('counters', {}).get('runs.started', 0)} runs started")  # fmt: skip
    left, right = st.columns(2)
    left.plotly_chart(charts.share_bars(standing), key="fair_shares")
    right.plotly_chart(charts.queue_depth_lines(history), key="fair_queue")
    st.dataframe(standing, hide_index=True, key="fair_table", column_config={
        "share_received": st.column_config.NumberColumn(format="percent"),
        "share_entitled": st.column_config.NumberColumn(format="percent"),
        "service_rate": st.column_config.NumberColumn("service/s", format="%.2f")})  # fmt: skip
    st.session_state["fair_tenants"] = list(standing["tenant"])
    st.session_state["fair_snapshot"] = snap


live_panel()

st.header("Why is this waiting?")
tenants = st.session_state.get("fair_tenants", [])
snap = st.session_state.get("fair_snapshot")
if snap is None:
    st.stop()
who = st.selectbox("Tenant", [None, *tenants], key="why_tenant",
                   format_func=lambda t: "every tenant" if t is None else t)  # fmt: skip
reasons = transforms.waiting_reasons(snap, who)
summary = {t["tenant"]: t["explanations"] for t in snap.get("tenants", [])}
for line in summary.get(who, []) if who else []:
    st.info(line)
if reasons.empty:
    st.success("Nothing is waiting" + (f" for {who}." if who else "."))
else:
    request = st.selectbox("Request", [None, *reasons["request_id"].unique()], key="why_request",
                           format_func=lambda r: "all waiting steps" if r is None else r)  # fmt: skip
    shown = reasons if request is None else reasons[reasons["request_id"] == request]
    st.dataframe(shown, hide_index=True, key="why_table")
