"""What-if: choose a trace, a baseline and variants (plan, quotas, headroom, workflow version),
run them on the twin with a progress bar, compare side by side with a delta table and 95%
intervals; the twin's measured error is shown next to every prediction."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import charts, data, ui
from app.client import ApiError

st.title("What-if")
try:
    traces = data.items("/admin/traces")
    plans = data.items("/admin/placement-plans")
    workflows = data.items("/admin/workflows")
    runs = data.items("/admin/whatif")
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()

FORM = "whatif"
with st.form(FORM):
    trace = st.selectbox("Trace", [t["name"] for t in traces], key="wi_trace")
    rate = st.number_input("Replay speed (x)", min_value=0.1, value=1.0, key="wi_rate")
    st.caption("Baseline: the active configuration. Variants (each compared with it):")
    plan = st.selectbox("Placement plan", [None, *[p["id"] for p in plans if p["status"] != "active"]],
                        format_func=lambda p: "unchanged" if p is None else f"plan #{p}",
                        key="wi_plan")  # fmt: skip
    quota_scale = st.slider("Scale every quota (%)", 10, 300, 100, key="wi_quota")
    headroom = st.slider("Headroom reserved (%)", 0, 50, 15, key="wi_headroom")
    flow = st.selectbox("Workflow version", [None, *[f"{w['name']}:{w['version']}" for w in workflows
                                                     if not w["name"].startswith("model.")]],
                        format_func=lambda w: "unchanged" if w is None else w, key="wi_flow")  # fmt: skip
    seeds = st.number_input("Seeds", min_value=1, max_value=20, value=3, key="wi_seeds")
    ui.field_error(FORM, "scenario")
    submitted = st.form_submit_button("Run on the twin", type="primary")
if submitted:
    variants = {}
    if plan is not None:
        variants[f"plan_{plan}"] = {"plan_id": plan}
    if quota_scale != 100:
        variants[f"quotas_x{quota_scale}%"] = {"quota_scale_milli": quota_scale * 10}
    if headroom != 15:
        variants[f"headroom_{headroom}%"] = {"headroom_reserved_milli": headroom * 10}
    if flow is not None:
        variants[f"workflow_{flow}"] = {"workflow": flow}
    scenario = {"trace": trace, "rate_scale_milli": int(rate * 1000), "baseline": "active",
                "variants": variants, "seeds": list(range(int(seeds)))}  # fmt: skip
    ui.attempt(FORM, "POST", "/admin/whatif", {"scenario": scenario, "submit": True},
               ok="Started on the twin.")  # fmt: skip
    st.rerun()
ui.form_error(FORM)

if not runs:
    st.info("No what-if runs yet.")
    st.stop()


@st.fragment(run_every=2.0)
def progress_panel() -> None:
    for run in data.items("/admin/whatif")[-5:][::-1]:
        st.progress(run["progress_milli"] / 1000,
                    text=f"#{run['id']} {run['status']}: {', '.join(run['scenario'].get('variants', {})) or 'baseline only'}")  # fmt: skip


progress_panel()
done = [r for r in runs if r["status"] == "succeeded" and r.get("results")]
pick = st.selectbox("Results of run", [r["id"] for r in done][::-1], key="wi_pick")
if pick is None:
    st.caption("No finished run yet.")
    st.stop()
results = next(r for r in done if r["id"] == pick)["results"]
comparisons = results.get("comparisons") or results.get("variants") or []
error = results.get("twin_error") or {}
cols = st.columns(max(1, len(comparisons)))
for col, comp in zip(cols, comparisons, strict=False):
    col.plotly_chart(charts.whatif_bars(comp.get("deltas", []), comp.get("variant", "variant")),
                     key=f"wi_chart_{comp.get('variant')}")  # fmt: skip
    col.write(comp.get("verdict", ""))
rows = [{"variant_name": c.get("variant"), **d} for c in comparisons for d in c.get("deltas", [])]
table = pd.DataFrame(rows, columns=["variant_name", "metric", "baseline", "variant", "delta", "ci95",
                                    "better"])  # fmt: skip
table["twin_error"] = table["metric"].map(lambda m: error.get(m, "not measured"))
st.dataframe(table, hide_index=True, key="wi_deltas")
