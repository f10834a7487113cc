"""Request timeline: where a run's time went, step by step, and the decisions taken for it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import data, timeline_chart, ui
from app.client import ApiError

ui.page_title(
    "Request timeline",
    "Find a run by id or pick a recent slow one: where its time went, step by step, and the "
    "core's decisions for it.",
)

c1, c2 = st.columns(2)
typed = c1.text_input("Run id", key="timeline_run_id", placeholder="paste a run id").strip()
refusal = c1.empty()  # a refused id is explained here, under the field
try:
    slow = data.one("/admin/runs/slowest", limit=20)
except ApiError as err:
    slow = []
    c2.error(f"Recent runs unavailable: {err.detail}")
picked = c2.selectbox(
    "Recent slow runs", [None, *[r["id"] for r in slow]], key="timeline_slow",
    format_func=lambda i: "pick one (slowest first)" if i is None else timeline_chart.slow_label(
        next(r for r in slow if r["id"] == i)),
)  # fmt: skip
run_id = typed or picked
if not run_id:
    st.info("Type a run id or pick a recent slow run.")
    st.stop()
try:
    t = data.one(f"/admin/requests/{run_id}/timeline")
except ApiError as err:
    where = refusal if typed else c2
    where.error(f"No timeline for {run_id!r}: {err.detail}")
    st.stop()

m = st.columns(4)
m[0].metric("Status", t["status"])
m[1].metric("End to end", f"{t['total_ms']:.1f} ms")
m[2].metric("Step spans", len(t["spans"]))
m[3].metric("Tenant", t["tenant"] or t["tenant_id"])
st.caption(f"Run {t['id']} of {t['workflow']} v{t['version']}, received {t['received_at']}")
if not t["recorded"]:
    st.warning("No timeline was recorded for this run (it is still going, or it ran before "
               "timelines were kept).")  # fmt: skip
st.info(f"Where did the time go: {t['where']['summary']}", icon=":material/timer:")
st.plotly_chart(timeline_chart.gantt(t["spans"], t["total_ms"]), key="timeline_gantt")

st.subheader("Decisions")
st.dataframe(timeline_chart.decisions_frame(t["decisions"]), hide_index=True,
             key="timeline_decisions")  # fmt: skip
with st.expander("Step spans"):
    columns = ["node", "chunk", "attempt", "model", "device", "replica", "batch_size",
               "ready_ms", "dispatched_ms", "end_ms", "queue_ms", "batch_wait_ms",
               "transfer_ms", "device_ms", "ok", "error", "batch_reason"]  # fmt: skip
    st.dataframe(pd.DataFrame(t["spans"], columns=columns), hide_index=True, key="timeline_spans")
if t["dropped"]:
    st.caption(f"{t['dropped']} span(s) or decision(s) beyond the record's bounds were left out.")
