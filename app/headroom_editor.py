"""The headroom editor of the Devices page: pick a reservation (or a new one), edit it, preview
it in the twin against the state in force now, then save it through the admin API.

The preview and the save send the same reservation, so what the twin tried is what gets saved;
the API checks it the same way both times, and its refusal is shown next to the field.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from app import data, transforms, twin, twin_panel, ui

FORM = "headroom"
SCOPES = {"keep": "its current pool", "accelerator": "an accelerator type",
          "devices": "chosen devices", "all": "every device"}  # fmt: skip
CLASSES = ["critical", "standard", "batch"]
PREVIEW_SEEDS, PREVIEW_REQUESTS = 2, 100


def _values(found: dict[str, Any] | None) -> dict[str, Any]:
    """The editor's field values for reservation ``found`` (None: a new one)."""
    if found is None:
        return {"hr_name": "", "hr_scope": "accelerator", "hr_percent": 10.0,
                "hr_classes": ["critical"], "hr_borrow": True}  # fmt: skip
    return {"hr_name": found["name"], "hr_scope": "keep", "hr_percent": found["reserved_milli"] / 10,
            "hr_classes": list(found["allowed_classes"]), "hr_borrow": bool(found["borrowable"])}  # fmt: skip


def _load(reservations: list[dict[str, Any]]) -> None:
    """on_change of the picker: fill the fields with the picked reservation (or defaults)."""
    found = next((r for r in reservations if r["id"] == st.session_state.get("hr_pick")), None)
    st.session_state.update(_values(found))


def _fields(devices: list[dict[str, Any]], picked: dict[str, Any] | None) -> dict[str, Any]:
    """The editor's widgets; returns the reservation body (no ``selector`` for "keep")."""
    for key, value in _values(None).items():  # widgets take their values from the session only
        st.session_state.setdefault(key, value)
    by_name = {d["name"]: d["id"] for d in devices}
    accelerators = sorted({d["accelerator"] for d in devices if d.get("accelerator")})
    scopes = [s for s in SCOPES if picked is not None or s != "keep"]
    if st.session_state.get("hr_scope") not in scopes:
        st.session_state["hr_scope"] = scopes[0]
    left, right = st.columns(2)
    with left:
        name = st.text_input("Name", key="hr_name")
        ui.field_error(FORM, "name")
        scope = st.radio("Devices", scopes, format_func=SCOPES.get, horizontal=True,
                         key="hr_scope")  # fmt: skip
        accel = st.selectbox("Accelerator", accelerators, key="hr_accel",
                             disabled=scope != "accelerator")  # fmt: skip
        chosen = st.multiselect("Devices", sorted(by_name), key="hr_devices",
                                disabled=scope != "devices")  # fmt: skip
        ui.field_error(FORM, "selector")
    with right:
        percent = st.number_input("Reserved (% of each device)", min_value=0.0, step=1.0,
                                  key="hr_percent")  # fmt: skip
        ui.field_error(FORM, "reserved_milli")
        classes = st.multiselect("Classes allowed", CLASSES, key="hr_classes")
        ui.field_error(FORM, "allowed_classes")
        borrow = st.checkbox("Others may borrow it preemptibly", key="hr_borrow")
    body = twin.headroom_body(name, "all" if scope == "keep" else scope, accel,
                              [by_name[n] for n in chosen], percent, classes, borrow)  # fmt: skip
    if scope == "keep":
        body.pop("selector")
    return body


def _pool_preview(devices: list[dict[str, Any]], picked: dict | None, body: dict) -> None:
    selector = body.get("selector") or (picked or {}).get("selector") or {}
    held = transforms.headroom_preview(devices, selector, body["reserved_milli"])
    mib = int(held["reserved_mib"].sum()) if len(held) else 0
    with st.expander(f"Pool: {len(held)} device(s), {mib:,} MiB of memory held back in all"):
        st.dataframe(held, hide_index=True, key="hr_pool")


def render(devices: list[dict[str, Any]], reservations: list[dict[str, Any]]) -> None:
    """The reservations table and the editor (preview in the twin, then save)."""
    shown = pd.DataFrame(reservations, columns=["id", "name", "reserved_milli",
                                                "allowed_classes", "borrowable", "selector"])  # fmt: skip
    shown["selector"] = shown["selector"].map(json.dumps)
    st.dataframe(shown, hide_index=True, key="headroom_table")
    names = {r["id"]: r["name"] for r in reservations}
    pick = st.selectbox("Reservation to edit", [None, *names], key="hr_pick",
                        format_func=lambda i: "New reservation" if i is None else names[i],
                        on_change=_load, args=(reservations,))  # fmt: skip
    picked = next((r for r in reservations if r["id"] == pick), None)
    body = _fields(devices, picked)
    _pool_preview(devices, picked, body)
    traces = [t["name"] for t in data.items("/admin/traces")]
    trace = st.selectbox("Preview on trace", traces, key="hr_trace",
                         help=f"{PREVIEW_REQUESTS} requests of it, {PREVIEW_SEEDS} seeds")  # fmt: skip
    change = body | ({"id": pick} if pick is not None else {})
    left, right, _ = st.columns([1, 1, 3])
    if left.button("Preview in twin", key="hr_preview", icon=":material/science:"):
        request = twin.preview_request(f"edited {body['name'] or 'reservation'}",
                                       {"headroom_set": [change]}, trace, PREVIEW_SEEDS,
                                       PREVIEW_REQUESTS)  # fmt: skip
        if twin_panel.start(FORM, request, asked=change) is None:
            st.rerun()  # show the API's refusal next to the field it concerns
    if right.button("Save", key="hr_save", type="primary", icon=":material/save:"):
        path = "/admin/headroom" + (f"/{pick}" if pick is not None else "")
        ui.attempt(FORM, "PATCH" if pick is not None else "POST", path, body,
                           ok=f"Reservation {body['name']!r} saved.")  # fmt: skip
        st.rerun()  # fresh values on success; the refusal next to its field otherwise
    ui.form_error(FORM)
    if twin_panel.asked(FORM) not in (None, change):
        st.caption("The fields changed since this preview: preview again before saving.")
    twin_panel.follow(FORM)
