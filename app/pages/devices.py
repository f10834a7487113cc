"""Devices and headroom: inventory per node and interconnect domain, health, memory over time;
headroom reservations (create, edit) with a preview of their effect before saving."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from app import charts, data, transforms, ui
from app.client import ApiError

st.title("Devices and headroom")
try:
    devices = [d for d in data.items("/admin/devices") if d["status"] != "retired"]
    nodes = data.by_id("/admin/nodes")
    reservations = data.items("/admin/headroom")
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()

left, right = st.columns([2, 3])
left.plotly_chart(charts.inventory_sunburst(devices, nodes), key="inventory")
frame = pd.DataFrame(devices)
if not frame.empty:
    frame["node"] = frame["node_id"].map(nodes)
    right.dataframe(frame[["name", "node", "interconnect_group", "accelerator", "kind",
                           "memory_mib", "status", "is_real"]], hide_index=True, key="devices")  # fmt: skip


@st.fragment(run_every=data.settings().live_refresh_s * 2)
def memory_panel() -> None:
    """Samples the live core's device memory into a rolling history and draws it."""
    history = st.session_state.setdefault("memory_history", [])
    try:
        snap = data.live_snapshot()
    except ApiError as err:
        st.caption(f"Memory over time needs the live runtime: {err.detail}")
        return
    share = {d["device_id"]: d["used_mib"] / d["memory_mib"] if d["memory_mib"] else 0.0
             for d in snap.get("devices", [])}  # fmt: skip
    history.append({"t": round(snap["now"], 1), "devices": share})
    del history[:-120]
    st.plotly_chart(charts.memory_heatmap(history), key="memory_heatmap")


memory_panel()

st.header("Headroom reservations")
FORM = "headroom_edit"
shown = pd.DataFrame(reservations, columns=["id", "name", "reserved_milli", "allowed_classes",
                                            "borrowable", "selector"])  # fmt: skip
shown["selector"] = shown["selector"].map(json.dumps)
edited = st.data_editor(shown, key="headroom_table", hide_index=True,
                        disabled=["id", "name", "allowed_classes", "selector"])  # fmt: skip
changes = st.session_state.get("headroom_table", {}).get("edited_rows", {})
if changes and st.button("Save reservation changes", key="headroom_save"):
    for row, change in changes.items():
        rid = int(shown.iloc[int(row)]["id"])
        body = {k: (int(v) if k == "reserved_milli" else bool(v)) for k, v in change.items()}
        ui.attempt(FORM, "PATCH", f"/admin/headroom/{rid}", body, ok="Reservation saved.")
    st.rerun()
ui.field_error(FORM, "reserved_milli")
ui.form_error(FORM)

st.subheader("New reservation")
NEW = "headroom_new"
by_name = {d["name"]: d["id"] for d in devices}
accelerators = sorted({d["accelerator"] for d in devices if d.get("accelerator")})
with st.form(NEW):
    name = st.text_input("Name", key="hr_name")
    ui.field_error(NEW, "name")
    scope = st.radio("Devices", ["accelerator", "devices", "all"], horizontal=True, key="hr_scope")
    accel = st.selectbox("Accelerator", accelerators, key="hr_accel")
    picked = st.multiselect("Devices", sorted(by_name), key="hr_devices")
    percent = st.number_input("Reserved (% of each device)", min_value=0.0, value=10.0,
                              step=1.0, key="hr_percent")  # fmt: skip
    ui.field_error(NEW, "reserved_milli")
    classes = st.multiselect("Classes allowed", ["critical", "standard", "batch"],
                             default=["critical"], key="hr_classes")  # fmt: skip
    ui.field_error(NEW, "allowed_classes")
    borrowable = st.checkbox("Others may borrow it preemptibly", value=True, key="hr_borrow")
    preview = st.form_submit_button("Preview")
    create = st.form_submit_button("Create reservation", type="primary")
selector = {"accelerator": {"accelerator": accel}, "all": {"labels": {}},
            "devices": {"device_ids": [by_name[n] for n in picked]}}[scope]  # fmt: skip
body = {"name": name, "selector": selector, "reserved_milli": int(round(percent * 10)),
        "allowed_classes": classes, "borrowable": borrowable}  # fmt: skip
if preview or create:
    held = transforms.headroom_preview(devices, selector, body["reserved_milli"])
    st.caption(
        f"Preview: {len(held)} device(s) covered, "
        f"{int(held['reserved_mib'].sum()) if len(held) else 0} MiB held back in all."
    )
    st.dataframe(held, hide_index=True, key="hr_preview")
if create:
    ui.attempt(NEW, "POST", "/admin/headroom", body, ok=f"Reservation {name!r} created.")
    st.rerun()
ui.form_error(NEW)
if st.button("Simulate it in the twin", key="hr_twin",
             help="creates a what-if run with this reservation added"):  # fmt: skip
    scenario = {"kind": "headroom", "variants": {"with_" + (name or "reservation"):
                                                 {"headroom_add": [body]}}}  # fmt: skip
    ui.attempt("hr_twin", "POST", "/admin/whatif", {"scenario": scenario, "submit": True},
               ok="What-if started: follow it on the What-if page.")  # fmt: skip
    st.rerun()
ui.form_error("hr_twin")
