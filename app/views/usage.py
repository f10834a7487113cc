"""Usage and billing per tenant and period (CSV export), and the audit log with filters."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import charts, data, ui
from app.client import ApiError

ui.page_title(
    "Usage and audit",
    "Tokens and device time billed per tenant, model and workflow node, and every admin change in the audit log.",
)
try:
    tenants = {t["id"]: t["name"] for t in data.items("/admin/tenants")}
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()

st.header("Usage and billing")
c1, c2 = st.columns(2)
picked = c1.multiselect("Tenants", list(tenants), format_func=tenants.get, key="usage_tenants")
period = c2.date_input("Period", value=(), key="usage_period")
rows = []
for tid in picked or list(tenants):
    report = data.one("/admin/usage", tenant_id=tid, limit=1000)
    rows += [{"tenant": tenants[tid], **item} for item in report["items"]]
frame = pd.DataFrame(rows, columns=["tenant", "request_id", "node_id", "attempt", "input_tokens",
                                    "output_tokens", "device_ms", "cost_units", "recorded_at"])  # fmt: skip
frame["day"] = pd.to_datetime(frame["recorded_at"]).dt.date
if isinstance(period, tuple) and len(period) == 2:
    start, end = period
    frame = frame[(frame["day"] >= start) & (frame["day"] <= end)]
totals = frame.groupby("tenant")[["input_tokens", "output_tokens", "device_ms", "cost_units"]].sum()
st.plotly_chart(charts.usage_bars(frame.groupby(["tenant", "day"], as_index=False)["cost_units"].sum()),
                key="usage_chart")  # fmt: skip
st.dataframe(totals.reset_index(), hide_index=True, key="usage_totals")
st.download_button(
    "Export CSV",
    frame.drop(columns=["day"]).to_csv(index=False),
    file_name="legato-usage.csv",
    mime="text/csv",
    key="usage_csv",
)

st.header("Audit log")
a1, a2, a3 = st.columns(3)
entity = a1.text_input("Entity type", key="audit_entity", placeholder="tenant, quota, ...")
actor = a2.text_input("Actor", key="audit_actor")
action = a3.text_input("Action", key="audit_action", placeholder="create, update, ...")
try:
    audit = data.one("/admin/audit", entity_type=entity or None, actor=actor or None,
                     action=action or None, limit=200)  # fmt: skip
except ApiError as err:
    st.error(f"Filter refused: {err.detail}")
    st.stop()
log = pd.DataFrame(audit["items"], columns=["at", "actor", "action", "entity_type", "entity_id",
                                            "before", "after"])  # fmt: skip
st.caption(f"{audit['total']} record(s) match; newest first.")
st.dataframe(log, hide_index=True, key="audit_table")
