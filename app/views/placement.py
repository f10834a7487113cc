"""Models and placement: the active plan as a device x model map; the models with their batch
settings and autoscaling (edit one), their precision variants (measured quality against the
exact floor; register, retire) and their canaries (set, watch, stop); drafts (generate from the active plan, edit), their diff against the active
plan, simulation in the twin (with the twin's measured error), a plan proposed from observed
demand, the twin's gate (a replay of recent traffic against the plan, its report beside the
placement in force, per tenant, the force switch), rollout on the live fleet with its progress,
what the observer saw after it (observed beside predicted), and rollback."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import (
    autoscale_editor,
    canary_panel,
    charts,
    data,
    models_editor,
    plan_gate,
    plan_report,
    rollout_panel,
    transforms,
    twin,
    twin_panel,
    ui,
    variants_panel,
)
from app.client import ApiError

ui.page_title(
    "Models and placement",
    "Where each model version runs: propose a plan, replay it in the twin, roll it out or back; canaries and autoscaling per model.",
)
try:
    plans = data.items("/admin/placement-plans")
    devices = ui.names("/admin/devices")
    model_rows = data.items("/admin/models")
    models = {m["id"]: f"{m['name']}:{m['version']}" for m in model_rows}
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()

active = next((p for p in plans if p["status"] == "active"), None)
drafts = [p for p in plans if p["status"] in ("draft", "proposed", "simulated")]
active_rows = data.items("/admin/placements", plan_id=active["id"]) if active else []
st.subheader(f"Active plan #{active['id']}: {active['note']}" if active else "No active plan")
st.plotly_chart(charts.placement_map(active_rows, devices, models), key="active_map")

st.subheader("Rollout on the live fleet")
following = rollout_panel.followed(active["id"] if active else None)
rollout_panel.panel(following)
plan_report.observation(following)
if st.button(f"Roll back plan #{following}" if following else "Roll back", key="plan_back",
             icon=":material/undo:", disabled=not rollout_panel.can_roll_back(
                 rollout_panel.progress(following)),
             help="the live fleet goes back to the placement it had before this plan's "
                  "completed rollout"):  # fmt: skip
    rollout_panel.roll_back(following)
    st.rerun()
ui.form_error(rollout_panel.BACK)

st.header("Models")
models_editor.render(model_rows)
autoscale_editor.render(model_rows)
st.subheader("Precision variants")
variants_panel.render(model_rows)
st.subheader("Canary versions")
canary_panel.render(model_rows)

FORM = "plan"
st.header("Drafts")
if st.button("New draft from the active plan", key="plan_new", disabled=active is None):
    made = ui.attempt(FORM, "POST", "/admin/placement-plans",
                      {"parent_id": active["id"], "note": f"draft from plan #{active['id']}"})  # fmt: skip
    for row in active_rows if made else []:
        ui.attempt(FORM, "POST", "/admin/placements", {
            "plan_id": made["id"], "model_id": row["model_id"], "device_ids": row["device_ids"],
            "replicas": row["replicas"], "pool": row["pool"], "reason": row["reason"]})  # fmt: skip
    st.session_state["plan_pick"] = made["id"] if made else None
    st.rerun()
ui.form_error(FORM)
if st.button("Propose a plan from observed demand", key="plan_propose",
             icon=":material/auto_awesome:"):  # fmt: skip
    proposed = plan_gate.propose()  # None: refused, and the refusal is shown below
    if proposed is not None:
        st.session_state["plan_pick"] = proposed
    st.rerun()
ui.form_error(plan_gate.PROPOSE)
if not drafts:
    st.info("No draft: generate one from the active plan.")
    st.stop()

pick = st.selectbox("Draft", [p["id"] for p in drafts], key="plan_pick",
                    format_func=lambda i: f"#{i} " + next(p["note"] for p in drafts if p["id"] == i))  # fmt: skip
rows = data.items("/admin/placements", plan_id=pick)
table = pd.DataFrame(rows, columns=["id", "model_id", "device_ids", "replicas", "pool", "reason"])
table.insert(1, "model", table["model_id"].map(models))
table["devices"] = table["device_ids"].map(
    lambda ids: ", ".join(devices.get(i, str(i)) for i in ids)
)
st.data_editor(table.drop(columns=["model_id", "device_ids"]), key="draft_table",
               hide_index=True, disabled=["id", "model", "devices"],
               column_config={"pool": st.column_config.SelectboxColumn(options=["hot", "cold"])})  # fmt: skip
edits = st.session_state.get("draft_table", {}).get("edited_rows", {})
if edits and st.button("Save draft rows", key="draft_save"):
    for row, change in edits.items():
        pid = int(table.iloc[int(row)]["id"])
        ui.attempt(FORM, "PATCH", f"/admin/placements/{pid}", change, ok="Draft saved.")
    st.rerun()
ui.field_error(FORM, "replicas")

with st.form("placement_add"):
    st.caption("Add a placement to the draft")
    m = st.selectbox(
        "Model", sorted(models, key=models.get), format_func=models.get, key="pa_model"
    )
    ds = st.multiselect("Devices (one group)", sorted(devices, key=devices.get),
                        format_func=devices.get, key="pa_devices")  # fmt: skip
    n = st.number_input("Replicas", min_value=0, value=1, key="pa_replicas")
    add = st.form_submit_button("Add")
if add:
    ui.attempt("placement_add", "POST", "/admin/placements", {"plan_id": pick, "model_id": m,
               "device_ids": ds, "replicas": int(n), "pool": "hot", "reason": "console"},
               ok="Placement added.")  # fmt: skip
    st.rerun()
ui.field_error("placement_add", "device_ids")
ui.form_error("placement_add")

diff = transforms.plan_diff(active_rows, rows)
diff.insert(1, "model", diff["model_id"].map(models))
st.subheader(f"Diff against the active plan: {len(diff)} change(s)")
st.dataframe(diff.drop(columns=["model_id"]), hide_index=True, key="plan_diff")
force = plan_gate.render(pick)
traces = [t["name"] for t in data.items("/admin/traces")]
c1, c2, c3 = st.columns([2, 1, 1], vertical_alignment="bottom")
trace = c1.selectbox("Simulate on trace", traces, key="plan_trace")
if c2.button("Simulate in the twin", key="plan_sim", icon=":material/science:"):
    request = twin.preview_request(f"plan #{pick}", {"plan_id": pick}, trace, 2, 100)
    twin_panel.start("plan_sim", request, asked=pick)
    st.rerun()
if c3.button("Roll out", key="plan_rollout", type="primary", icon=":material/rocket_launch:"):
    rollout_panel.roll_out(pick, force)
    st.rerun()
ui.form_error(rollout_panel.FORM)
ui.form_error("plan_sim")
if twin_panel.asked("plan_sim") == pick:
    twin_panel.follow("plan_sim")
