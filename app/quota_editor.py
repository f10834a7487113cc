"""The quota editor of the Tenants page: every quota kind the core knows (requests, tokens,
concurrency, device time, bursts, queued runs) with its nominal, borrowing and lending limits and
period. Pick a quota (or a new one), edit it, preview the change (or the deletion) in the twin,
then save or delete it through the admin API, which hands it to the running core at once.

The preview and the save send the same values; the API's refusal is shown under the field.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app import charts, tenancy_preview, ui
from app import tenancy_forms as tf

FORM = "quota"
NEXT = "qe_pick_next"  # the quota to show after a rerun (set where the picker already exists)
NEW = 0  # the picker's "New quota" (ids start at 1; None would show as no choice at all)


def _values(found: dict[str, Any] | None, tenant: int | None) -> dict[str, Any]:
    """The editor's field values for quota ``found`` (None: a new one for ``tenant``)."""
    if found is None:
        return {"qe_tenant": tenant, "qe_resource": "requests_per_min", "qe_nominal": 60,
                "qe_borrow_any": True, "qe_borrow": 0, "qe_lend_any": True, "qe_lend": 0,
                "qe_period": 60}  # fmt: skip
    return {"qe_tenant": found["tenant_id"], "qe_resource": found["resource"],
            "qe_nominal": found["nominal"], "qe_borrow_any": found["borrowing_limit"] is None,
            "qe_borrow": found["borrowing_limit"] or 0, "qe_lend_any": found["lending_limit"] is None,
            "qe_lend": found["lending_limit"] or 0, "qe_period": found["period_s"]}  # fmt: skip


def _load(quotas: list[dict[str, Any]], tenant: int | None) -> None:
    """on_change of the picker: fill the fields with the picked quota (or defaults)."""
    found = next((q for q in quotas if q["id"] == st.session_state.get("qe_pick")), None)
    st.session_state.update(_values(found, tenant))


def _limits(resource: str) -> tuple[bool, int, bool, int]:
    """Borrowing and lending widgets (off for admission limits, which are never lent)."""
    alone = resource in tf.NOT_BORROWABLE
    if alone:
        st.caption("An admission limit of the tenant alone: never borrowed or lent in a cohort.")
    left, right = st.columns(2)
    b_any = left.checkbox("Borrow without limit", key="qe_borrow_any", disabled=alone)
    borrow = left.number_input("Borrowing limit", step=1, key="qe_borrow", disabled=alone or b_any)
    with left:
        ui.field_error(FORM, "borrowing_limit")
    l_any = right.checkbox("Lend all idle quota", key="qe_lend_any", disabled=alone)
    lend = right.number_input("Lending limit", step=1, key="qe_lend", disabled=alone or l_any)
    with right:
        ui.field_error(FORM, "lending_limit")
    return b_any, borrow, l_any, lend


def _fields(names: dict[int, str], picked: dict[str, Any] | None) -> dict[str, Any]:
    """The editor's widgets; returns the values the request bodies are built from."""
    for key, value in _values(None, next(iter(names), None)).items():
        st.session_state.setdefault(key, value)
    left, right = st.columns(2)
    with left:
        tenant = st.selectbox("Tenant", list(names), format_func=names.get, key="qe_tenant",
                              disabled=picked is not None)  # fmt: skip
        ui.field_error(FORM, "tenant_id")
        resource = st.selectbox("Kind", list(tf.RESOURCES), key="qe_resource",
                                disabled=picked is not None,
                                format_func=lambda r: f"{r}: {tf.RESOURCES[r]}")  # fmt: skip
        ui.field_error(FORM, "resource")
    with right:
        # no help icon: its label would make "Nominal" ambiguous to label lookups
        nominal = st.number_input("Nominal", step=1, key="qe_nominal")
        ui.field_error(FORM, "nominal")
        period = st.number_input("Period (s)", step=1, key="qe_period")
        ui.field_error(FORM, "period_s")
    b_any, borrow, l_any, lend = _limits(resource)
    return {"tenant_id": tenant, "resource": resource, "nominal": nominal, "period_s": period,
            "borrow_any": b_any, "borrowing_limit": borrow, "lend_any": l_any,
            "lending_limit": lend}  # fmt: skip


def _table(quotas: list[dict[str, Any]], names: dict[int, str]) -> None:
    frame = pd.DataFrame(quotas, columns=["id", "tenant_id", "resource", "nominal",
                                          "borrowing_limit", "lending_limit", "period_s"])  # fmt: skip
    frame.insert(1, "tenant", frame["tenant_id"].map(names))
    st.dataframe(frame.drop(columns=["tenant_id"]), hide_index=True, key="quota_table",
                 column_config={"borrowing_limit": st.column_config.NumberColumn(help="empty: no limit"),
                                "lending_limit": st.column_config.NumberColumn(help="empty: no limit")})  # fmt: skip


def _picker(quotas: list[dict[str, Any]], names: dict[int, str]) -> int:
    labels = {q["id"]: tf.quota_label(q, names) for q in quotas}
    if NEXT in st.session_state or "qe_pick" not in st.session_state:
        # first visit: the first quota; after a create or delete: the new one (or none)
        st.session_state["qe_pick"] = st.session_state.pop(NEXT, next(iter(labels), NEW))
        _load(quotas, next(iter(names), None))
    return st.selectbox("Quota to edit", [*labels, NEW], key="qe_pick",
                        format_func=lambda i: "New quota" if i == NEW else labels[i],
                        on_change=_load, args=(quotas, next(iter(names), None)))  # fmt: skip


def _save(pick: int, picked: dict[str, Any] | None, values: dict[str, Any]) -> None:
    if picked is None:
        made = ui.attempt(FORM, "POST", "/admin/quotas", tf.quota_body(values, True),
                          ok="Quota created. The running core applies it at once.")  # fmt: skip
        if made:
            st.session_state[NEXT] = made["id"]
    else:
        body = tf.changed(picked or {}, tf.quota_body(values, False))
        ui.attempt(FORM, "PATCH", f"/admin/quotas/{pick}", body,
                   ok="Quota saved. The running core applies it at once.")  # fmt: skip
    tenancy_preview.saved(FORM)
    st.rerun()


def render(tenants: list[dict[str, Any]], quotas: list[dict[str, Any]]) -> None:
    """The quotas table and the editor (preview in the twin, then save or delete)."""
    names = {t["id"]: t["name"] for t in tenants}
    _table(quotas, names)
    pick = _picker(quotas, names)
    picked = next((q for q in quotas if q["id"] == pick), None)
    values = _fields(names, picked)
    if picked is None:
        change = tf.quota_body(values, True)
    else:
        change = {"id": pick, **tf.changed(picked, tf.quota_body(values, False))}
    trace = tenancy_preview.trace_picker(FORM)
    cols = st.columns(4)
    label = tf.quota_label(change if picked is None else picked, names)
    if cols[0].button("Preview in twin", key="qe_preview", icon=":material/science:"):
        tenancy_preview.preview(FORM, f"quota {label}", "quota_set", change, trace)
    if cols[1].button("Save quota", key="qe_save", type="primary", icon=":material/save:"):
        _save(pick, picked, values)
    if picked is not None:
        gone = {"id": pick, "delete": True}
        if cols[2].button("Preview deleting it", key="qe_preview_delete"):
            tenancy_preview.preview(FORM, f"without quota {label}", "quota_set", gone, trace)
        if cols[3].button("Delete", key="qe_delete", icon=":material/delete:"):
            ui.attempt(FORM, "DELETE", f"/admin/quotas/{pick}", ok=f"Quota {label} deleted.")
            if ui.error_of(FORM) is None:  # a 204 answers None: the error tells the outcome
                st.session_state[NEXT] = NEW
            tenancy_preview.saved(FORM)
            st.rerun()
    ui.form_error(FORM)
    tenancy_preview.follow(FORM, change)


def use_chart(snap: dict[str, Any] | None, quotas: list[dict[str, Any]], names: dict) -> None:
    """Each quota's use as the running core counts it (stored values when no core runs)."""
    use = [{"tenant": t["tenant_id"], **q} for t in (snap or {}).get("tenancy", {}).get("tenants", [])
           for q in t.get("quota", [])]  # fmt: skip
    if not use:
        st.caption("Current use comes from the live core, which is not running: nothing in use.")
        use = [{"tenant": names.get(q["tenant_id"]), "resource": q["resource"], "used": 0,
                "nominal": q["nominal"]} for q in quotas]  # fmt: skip
    else:
        st.caption("Use and quotas as the running core holds them now: a quota saved here "
                   "reaches it at once, without a restart.")  # fmt: skip
    st.plotly_chart(charts.quota_bars(use), key="quota_use")
