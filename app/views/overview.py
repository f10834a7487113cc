"""Overview: fleet KPIs, throughput and latency per workflow, SLO attainment, alerts."""

from __future__ import annotations

import streamlit as st

from app import charts, data, transforms, ui
from app.client import ApiError

ui.page_title(
    "Overview",
    "The fleet at a glance: runs and latency against the SLO, what waits and why, alerts and the live core's counters.",
)
slo_s = st.sidebar.number_input("Latency SLO (s)", min_value=0.1, value=10.0, step=0.5,
                                key="overview_slo")  # fmt: skip

try:
    devices = data.items("/admin/devices")
    models = data.items("/admin/models", status="active")
    tenants = data.items("/admin/tenants", status="active")
    workflows = data.items("/admin/workflows", status="active")
    requests = data.items("/admin/requests")
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()

live = [d for d in devices if d["status"] != "retired"]
up = sum(d["status"] == "up" for d in live)
cols = st.columns(5)
cols[0].metric("Devices up", f"{up}/{len(live)}", help="real and declared devices")
cols[1].metric("Real devices", sum(d["is_real"] for d in live))
cols[2].metric("Active models", len(models))
cols[3].metric("Active tenants", len(tenants))
cols[4].metric("Active workflows", len(workflows))


def _waiting(snapshot: dict) -> None:
    """Steps waiting now (replica queues plus pending, unbound work) and why the oldest waits."""
    counts = transforms.waiting_counts(snapshot)
    st.subheader("Waiting work")
    cols = st.columns(3)
    cols[0].metric("Steps waiting", int(counts["total"].sum()))
    cols[1].metric("Pending (unbound)", int(counts["pending"].sum()))
    cols[2].metric("In replica queues", int(counts["queue"].sum()))
    oldest = transforms.waiting_reasons(snapshot).head(1)
    for row in oldest.itertuples():
        st.caption(f"Oldest: {row.request_id} ({row.tenant}, {row.waits_in}): {row.why}")


@st.fragment(run_every=data.settings().live_refresh_s * 5)
def live_panel() -> None:
    """Alerts and per-workflow figures, refreshed while the page is open."""
    snapshot = None
    try:
        snapshot = data.live_snapshot()
    except ApiError as err:
        st.caption(f"Live core: {err.detail}")
    found = transforms.alerts(devices, snapshot)
    st.subheader("Alerts")
    if not found:
        st.success("No alerts: every device up, no quota exhausted, headroom untouched.")
    for severity, text in found:
        getattr(st, severity)(text)
    stats = transforms.workflow_stats(data.items("/admin/requests"), float(slo_s))
    st.subheader("Workflows")
    left, right = st.columns([3, 2])
    left.plotly_chart(charts.workflow_bars(stats), key="overview_workflows")
    right.dataframe(stats, hide_index=True, key="overview_stats",
                    column_config={"slo_attainment": st.column_config.ProgressColumn(
                        "SLO attainment", min_value=0.0, max_value=1.0, format="percent")})  # fmt: skip
    if snapshot is not None:
        _waiting(snapshot)
        counters = snapshot.get("counters", {})
        st.caption("Core counters: " + (", ".join(f"{k}={v}" for k, v in sorted(counters.items()))
                                        or "none yet (no work since the runtime started)"))  # fmt: skip


live_panel()
st.caption(f"{len(requests)} runs recorded in all.")
