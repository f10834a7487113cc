"""The tenant editor of the Tenants page: pick a tenant (or a new one); edit its name, fair-share
weight, priority class, status, cohort (move it between cohorts, or out of any), strict
priority, the default quality class of its runs and whether the core may degrade them to a
cheaper precision variant when the preferred one is saturated; preview a change that alters scheduling in the twin, then save it through the admin
API, which hands it to the running core at once. The API's refusal is shown under the field."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app import tenancy_forms as tf
from app import tenancy_preview, ui

FORM = "tenant"
NEXT = "te_pick_next"  # the tenant to show after a rerun (set where the picker already exists)
NEW = NO_COHORT = 0  # the "New tenant" and "no cohort" choices (None would show as no choice)
DEFAULT_QUALITY = "from priority class"  # quality None: the core maps the priority class
QUALITIES = (DEFAULT_QUALITY, "exact", "balanced", "fast")


def _values(found: dict[str, Any] | None) -> dict[str, Any]:
    """The editor's field values for tenant ``found`` (None: a new one)."""
    if found is None:
        return {"te_name": "", "te_weight": 1, "te_class": "standard", "te_status": "active",
                "te_cohort": NO_COHORT, "te_strict": False, "te_quality": DEFAULT_QUALITY,
                "te_degrade": False}  # fmt: skip
    return {"te_name": found["name"], "te_weight": found["weight"],
            "te_class": found["priority_class"], "te_status": found["status"],
            "te_cohort": found["cohort_id"] or NO_COHORT, "te_strict": bool(found["strict_priority"]),
            "te_quality": found.get("quality") or DEFAULT_QUALITY,
            "te_degrade": bool(found.get("allow_degrade"))}  # fmt: skip


def _load(tenants: list[dict[str, Any]]) -> None:
    """on_change of the picker: fill the fields with the picked tenant (or defaults)."""
    found = next((t for t in tenants if t["id"] == st.session_state.get("te_pick")), None)
    st.session_state.update(_values(found))


def _fields(cohorts: dict[int, str]) -> dict[str, Any]:
    """The editor's widgets; returns the tenant body as the API takes it."""
    for key, value in _values(None).items():
        st.session_state.setdefault(key, value)
    left, right = st.columns(2)
    with left:
        name = st.text_input("Name", key="te_name")
        ui.field_error(FORM, "name")
        weight = st.number_input("Fair-share weight", step=1, key="te_weight",
                                 help="ratios between tenants matter")  # fmt: skip
        ui.field_error(FORM, "weight")
        klass = st.selectbox("Priority class", tf.CLASSES, key="te_class")
        ui.field_error(FORM, "priority_class")
    with right:
        cohort = st.selectbox("Cohort", [NO_COHORT, *cohorts], key="te_cohort",
                              format_func=lambda c: "no cohort" if c == NO_COHORT else cohorts.get(c, c),
                              help="tenants of a cohort lend and borrow idle quota")  # fmt: skip
        ui.field_error(FORM, "cohort_id")
        status = st.selectbox("Status", tf.STATUSES, key="te_status")
        ui.field_error(FORM, "status")
        strict = st.checkbox("Strict priority", key="te_strict",
                             help="its higher-class work overtakes other tenants' lower classes")  # fmt: skip
        quality = st.selectbox("Quality class", QUALITIES, key="te_quality",
                               help="which precision variants may serve its runs by default")  # fmt: skip
        ui.field_error(FORM, "quality")
        degrade = st.checkbox("Allow degrading", key="te_degrade",
                              help="run on a cheaper variant when the preferred one is saturated")  # fmt: skip
        ui.field_error(FORM, "allow_degrade")
    return tf.tenant_body({"name": name, "weight": weight, "priority_class": klass,
                           "status": status, "cohort_id": cohort or None, "strict_priority": strict,
                           "quality": None if quality == DEFAULT_QUALITY else quality,
                           "allow_degrade": degrade})  # fmt: skip


def _picker(tenants: list[dict[str, Any]]) -> int:
    names = {t["id"]: t["name"] for t in tenants}
    if NEXT in st.session_state or "te_pick" not in st.session_state:
        # first visit: the first tenant; after a create: the new one
        st.session_state["te_pick"] = st.session_state.pop(NEXT, next(iter(names), NEW))
        _load(tenants)
    return st.selectbox("Tenant to edit", [*names, NEW], key="te_pick",
                        format_func=lambda i: "New tenant" if i == NEW else names[i],
                        on_change=_load, args=(tenants,))  # fmt: skip


def _save(pick: int, picked: dict[str, Any] | None, body: dict[str, Any]) -> None:
    if picked is None:
        made = ui.attempt(FORM, "POST", "/admin/tenants", body,
                          ok=f"Tenant {body['name']!r} created.")  # fmt: skip
        if made:
            st.session_state[NEXT] = made["id"]
    else:
        ui.attempt(FORM, "PATCH", f"/admin/tenants/{pick}", tf.changed(picked or {}, body),
                   ok="Tenant saved. The running core applies it at once.")  # fmt: skip
    tenancy_preview.saved(FORM)
    st.rerun()


def render(tenants: list[dict[str, Any]], cohorts: dict[int, str]) -> None:
    """The tenants table and the editor (preview in the twin, then save)."""
    frame = pd.DataFrame(tenants, columns=["id", "name", "weight", "priority_class", "status",
                                           "cohort_id", "strict_priority", "quality",
                                           "allow_degrade"])  # fmt: skip
    frame.insert(6, "cohort", frame["cohort_id"].map(cohorts))
    st.dataframe(frame.drop(columns=["cohort_id"]), hide_index=True, key="tenant_table")
    pick = _picker(tenants)
    picked = next((t for t in tenants if t["id"] == pick), None)
    body = _fields(cohorts)
    change = {"id": pick, **tf.changed(picked, body)} if picked is not None else None
    cols = st.columns([1, 1, 3])
    if change is not None and tf.schedules(change):
        trace = tenancy_preview.trace_picker(FORM)
        if cols[0].button("Preview in twin", key="te_preview", icon=":material/science:"):
            tenancy_preview.preview(FORM, f"tenant {picked['name']}", "tenant_set", change, trace)
    elif change is not None:
        st.caption("No change that alters scheduling to preview.")
    if cols[1].button("Save tenant" if picked else "Create tenant", key="te_save", type="primary",
                      icon=":material/save:"):  # fmt: skip
        _save(pick, picked, body)
    ui.form_error(FORM)
    tenancy_preview.follow(FORM, change)
