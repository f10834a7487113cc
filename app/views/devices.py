"""Devices and headroom: inventory per node and interconnect domain, health, memory over time;
headroom reservations: create or edit one, preview its effect in the twin, then save it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import charts, data, headroom_editor, ui
from app.client import ApiError

ui.page_title(
    "Devices and headroom",
    "Devices with their memory and load, and the headroom reserved on them for bursts, previewed in the twin before it is saved.",
)
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
headroom_editor.render(devices, reservations)
