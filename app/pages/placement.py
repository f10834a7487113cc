"""Models and placement: the active plan as a device x model map; drafts (generate from the
active plan, edit), their diff against the active plan, simulation in the twin, approval
(activation), rollout progress from the live core, and rollback to the previous plan."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import charts, data, transforms, ui
from app.client import ApiError

st.title("Models and placement")
try:
    plans = data.items("/admin/placement-plans")
    devices = ui.names("/admin/devices")
    models = {m["id"]: f"{m['name']}:{m['version']}" for m in data.items("/admin/models")}
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()

active = next((p for p in plans if p["status"] == "active"), None)
drafts = [p for p in plans if p["status"] in ("draft", "simulated")]
active_rows = data.items("/admin/placements", plan_id=active["id"]) if active else []
st.subheader(f"Active plan #{active['id']}: {active['note']}" if active else "No active plan")
st.plotly_chart(charts.placement_map(active_rows, devices, models), key="active_map")

snap = ui.live_or_notice()
if snap is not None:
    replicas = pd.DataFrame(snap.get("replicas", []))
    st.subheader("Rollout progress (live replicas)")
    if not replicas.empty:
        ready = int((replicas["state"] == "ready").sum()) if "state" in replicas else 0
        st.progress(ready / len(replicas), text=f"{ready}/{len(replicas)} replicas ready")
        st.dataframe(replicas, hide_index=True, key="live_replicas")

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
c1, c2, c3 = st.columns(3)
if c1.button("Simulate in the twin", key="plan_sim"):
    scenario = {"kind": "placement", "baseline_plan": active["id"] if active else None,
                "variants": {f"plan_{pick}": {"plan_id": pick}}}  # fmt: skip
    ui.attempt("plan_sim", "POST", "/admin/whatif", {"scenario": scenario, "submit": True},
               ok="Simulation started: see the What-if page.")  # fmt: skip
    st.rerun()
if c2.button("Approve and roll out", key="plan_activate", type="primary"):
    ui.attempt("plan_act", "POST", f"/admin/placement-plans/{pick}/activate",
               ok=f"Plan #{pick} is now active.")  # fmt: skip
    st.rerun()
previous = [p for p in plans if p["status"] == "retired"]
if c3.button("Roll back to the previous plan", key="plan_back", disabled=not previous):
    last = max(previous, key=lambda p: p["id"])
    made = ui.attempt("plan_act", "POST", "/admin/placement-plans",
                      {"parent_id": last["id"], "note": f"rollback to plan #{last['id']}"})  # fmt: skip
    for row in data.items("/admin/placements", plan_id=last["id"]) if made else []:
        ui.attempt(
            "plan_act",
            "POST",
            "/admin/placements",
            {k: row[k] for k in ("model_id", "device_ids", "replicas", "pool", "reason")}
            | {"plan_id": made["id"]},
        )
    if made:
        ui.attempt("plan_act", "POST", f"/admin/placement-plans/{made['id']}/activate",
                   ok=f"Rolled back: plan #{made['id']} (copy of #{last['id']}) is active.")  # fmt: skip
    st.rerun()
ui.form_error("plan_sim")
ui.form_error("plan_act")
