"""What-if: choose a trace, a baseline and variants (plan, quotas, headroom, workflow version),
run them on the twin with a progress bar, compare side by side with a delta table and 95%
intervals; the twin's measured error is shown next to every prediction."""

from __future__ import annotations

import streamlit as st

from app import charts, data, twin, twin_panel, ui
from app.client import ApiError

ui.page_title(
    "What-if",
    "Replay a real trace in the twin against the configuration in force and proposed changes, and compare the runs.",
)
try:
    traces = data.items("/admin/traces")
    plans = data.items("/admin/placement-plans")
    workflows = data.items("/admin/workflows")
    headroom = data.items("/admin/headroom")
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()

FORM = "whatif"
current = max((h["reserved_milli"] for h in headroom), default=0) // 10
with st.form(FORM):
    st.caption("Baseline: the configuration in force now. Each change below is a variant "
               "compared with it on the same requests and seeds.")  # fmt: skip
    left, mid, right = st.columns(3)
    trace = left.selectbox("Trace", [t["name"] for t in traces], key="wi_trace")
    rate = mid.number_input("Replay speed (x)", min_value=0.1, value=1.0, key="wi_rate")
    requests = right.number_input("Requests", min_value=10, max_value=5000, value=120,
                                  step=10, key="wi_requests")  # fmt: skip
    plan = st.selectbox("Placement plan", [None, *[p["id"] for p in plans if p["status"] != "active"]],
                        format_func=lambda p: "unchanged" if p is None else f"plan #{p}",
                        key="wi_plan")  # fmt: skip
    quota_scale = st.slider("Scale every quota (%)", 10, 300, 100, key="wi_quota")
    reserved = st.slider("Headroom reserved (%)", 0, 50, current, key="wi_headroom",
                         help=f"every reservation; {current}% now")  # fmt: skip
    flow = st.selectbox("Workflow version", [None, *[f"{w['name']}:{w['version']}" for w in workflows
                                                     if not w["name"].startswith("model.")]],
                        format_func=lambda w: "unchanged" if w is None else w, key="wi_flow")  # fmt: skip
    seeds = st.number_input("Seeds", min_value=1, max_value=20, value=3, key="wi_seeds")
    ui.field_error(FORM, "scenario")
    submitted = st.form_submit_button("Run on the twin", type="primary")
if submitted:
    variants = {}
    if plan is not None:
        variants[f"plan #{plan}"] = {"plan_id": plan}
    if quota_scale != 100:
        variants[f"quotas x{quota_scale}%"] = {"quota_scale_milli": quota_scale * 10}
    if reserved != current:
        variants[f"headroom {reserved}%"] = {"headroom_reserved_milli": reserved * 10}
    if flow is not None:
        variants[f"workflow {flow}"] = {"workflow": flow}
    workload = {"trace_name": trace, "rate_factor": rate, "max_requests": int(requests)}
    scenario = {"baseline": "active", "workload": workload, "variants": variants,
                "seeds": list(range(int(seeds)))}  # fmt: skip
    if twin_panel.start(FORM, {"scenario": scenario, "submit": True}, asked=variants) is None:
        st.rerun()
ui.form_error(FORM)
ended = twin_panel.follow(FORM, show_results=False)
if ended is not None and st.session_state.get("wi_shown") != ended["id"]:
    st.session_state["wi_pick"] = st.session_state["wi_shown"] = ended["id"]  # show it now
if ended is not None and ended["status"] == "failed":
    st.error(f"Twin run #{ended['id']} failed: {ended.get('error')}")

st.header("How far to trust the twin")
twin_panel.validation_controls()

st.header("Finished runs")
done = [r for r in data.items("/admin/whatif", status="succeeded") if r.get("results")]
newest = [r["id"] for r in done][::-1]
if st.session_state.get("wi_pick") not in newest:  # a run that just ended shows at once
    st.session_state["wi_pick"] = newest[0] if newest else None
pick = st.selectbox("Results of run", newest, key="wi_pick",
                    format_func=lambda i: f"#{i}: " + (", ".join(
                        next(r for r in done if r["id"] == i)["scenario"].get("variants") or {})
                        or "baseline only"))  # fmt: skip
if pick is None:
    st.caption("No finished run yet.")
    st.stop()
run = next(r for r in done if r["id"] == pick)
comparisons = run["results"].get("comparisons") or []
for col, comp in zip(st.columns(max(1, len(comparisons))), comparisons, strict=False):
    col.plotly_chart(charts.whatif_bars(comp.get("deltas", []), comp.get("variant", "variant"),
                                        twin.FIGURES), key=f"wi_chart_{comp.get('variant')}")  # fmt: skip
twin_panel.results(f"wi_run_{pick}", run)
