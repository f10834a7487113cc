"""Per-model autoscaling settings on the Models and placement page: at least / at most how many
replicas, the queue delay that adds one, the idle time that drains one; saved with
``PATCH /admin/models/{id}``.

Autoscaling is on while a maximum is set (off: ``max_replicas`` null). A zero delay or idle
time means "none" (null: no scale-out on backlog, no scale-in). Only changed fields are sent;
the API judges them together (``min_replicas`` above ``max_replicas`` is refused naming both
fields) and its refusal is shown under the field it names; nothing changes then.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app import ui
from app.models_editor import changes

FORM = "autoscale"


def wanted(on: bool, minimum: int, maximum: int, delay_ms: int, idle_ms: int) -> dict[str, Any]:
    """The settings as the API stores them: off -> ``max_replicas`` null; 0 ms -> null."""
    return {"min_replicas": int(minimum), "max_replicas": int(maximum) if on else None,
            "scale_out_delay_ms": int(delay_ms) or None, "idle_ms": int(idle_ms) or None}  # fmt: skip


def _field(column: Any, label: str, name: str, value: int, key: str, help: str) -> int:
    got = column.number_input(label, min_value=0, step=1, value=value, key=key, help=help)
    with column:
        ui.field_error(FORM, name)
    return int(got)


def render(models: list[dict[str, Any]]) -> None:
    """The autoscaling form of the model picked in the models editor (``me_pick``)."""
    editable = {m["id"]: m for m in models if m["status"] != "retired"}
    pick = st.session_state.get("me_pick")
    if pick not in editable:
        return
    model = editable[pick]
    name = f"{model['name']}:{model['version']}"
    st.subheader(f"Autoscaling of {name}")
    with st.form(FORM):
        on = st.checkbox("Autoscaling on (a maximum is set)", key=f"as_on_{pick}",
                         value=model.get("max_replicas") is not None)  # fmt: skip
        c1, c2, c3, c4 = st.columns(4)
        low = _field(c1, "Min replicas", "min_replicas", int(model.get("min_replicas") or 0),
                     f"as_min_{pick}", "kept even when idle (0: scale to zero)")  # fmt: skip
        high = _field(c2, "Max replicas", "max_replicas", int(model.get("max_replicas") or 1),
                      f"as_max_{pick}", "the most replicas autoscaling gives the model")  # fmt: skip
        delay = _field(c3, "Scale-out delay (ms)", "scale_out_delay_ms",
                       int(model.get("scale_out_delay_ms") or 0), f"as_delay_{pick}",
                       "add a replica when a request's predicted queue delay exceeds this "
                       "(0: no scale-out on backlog)")  # fmt: skip
        idle = _field(c4, "Idle time (ms)", "idle_ms", int(model.get("idle_ms") or 0),
                      f"as_idle_{pick}", "drain a replica idle this long (0: no scale-in)")  # fmt: skip
        saved = st.form_submit_button("Save autoscaling", key="as_save")
    if saved:
        body = changes(model, wanted(on, low, high, delay, idle))
        if body:
            ui.attempt(FORM, "PATCH", f"/admin/models/{pick}", body,
                       ok=f"Autoscaling of {name} saved.")  # fmt: skip
        else:
            ui.remember(FORM, None, f"Autoscaling of {name}: nothing changed.")
        st.rerun()
    ui.form_error(FORM)
