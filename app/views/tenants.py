"""Tenants and quotas: tenants (weight, priority class, status), cohorts, quotas (nominal,
borrowing, lending), API keys (shown once, revoke), and current use versus quota."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import charts, data, ui
from app.client import ApiError

st.title("Tenants and quotas")
try:
    tenants = data.items("/admin/tenants")
    cohorts = data.by_id("/admin/cohorts")
    quotas = data.items("/admin/quotas")
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()
names = {t["id"]: t["name"] for t in tenants}
CLASSES = ["critical", "standard", "batch"]


def save_edits(table_key: str, frame: pd.DataFrame, path: str, form: str) -> None:
    """PATCH every edited row of a data_editor; the API's refusal stays next to the table."""
    edits = st.session_state.get(table_key, {}).get("edited_rows", {})
    if edits and st.button("Save changes", key=f"{table_key}_save", type="primary"):
        for row, change in edits.items():
            item = int(frame.iloc[int(row)]["id"])
            ui.attempt(form, "PATCH", f"{path}/{item}", change, ok="Saved.")
        st.rerun()


tab_t, tab_q, tab_k, tab_c = st.tabs(["Tenants", "Quotas", "API keys", "Cohorts"])
with tab_t:
    frame = pd.DataFrame(tenants, columns=["id", "name", "weight", "priority_class", "status",
                                           "cohort_id"])  # fmt: skip
    st.data_editor(frame, key="tenant_table", hide_index=True, disabled=["id", "cohort_id"],
                   column_config={
                       "priority_class": st.column_config.SelectboxColumn(options=CLASSES),
                       "status": st.column_config.SelectboxColumn(
                           options=["active", "suspended"])})  # fmt: skip
    save_edits("tenant_table", frame, "/admin/tenants", "tenant_edit")
    for field in ("weight", "name", "priority_class"):
        ui.field_error("tenant_edit", field)
    ui.form_error("tenant_edit")
    with st.form("tenant_new"):
        st.caption("New tenant")
        name = st.text_input("Name", key="tn_name")
        ui.field_error("tenant_new", "name")
        weight = st.number_input("Weight", min_value=0, value=1, key="tn_weight")
        ui.field_error("tenant_new", "weight")
        klass = st.selectbox("Priority class", CLASSES, index=1, key="tn_class")
        cohort = st.selectbox("Cohort", [None, *cohorts], format_func=lambda c: cohorts.get(c, "none"),
                              key="tn_cohort")  # fmt: skip
        if st.form_submit_button("Create tenant"):
            body = {"name": name, "weight": int(weight), "priority_class": klass,
                    "cohort_id": cohort}  # fmt: skip
            ui.attempt("tenant_new", "POST", "/admin/tenants", body, ok=f"Tenant {name!r} created.")
            st.rerun()
    ui.form_error("tenant_new")

with tab_q:
    frame = pd.DataFrame(quotas, columns=["id", "tenant_id", "resource", "nominal",
                                          "borrowing_limit", "lending_limit", "period_s"])  # fmt: skip
    frame.insert(1, "tenant", frame["tenant_id"].map(names))
    st.data_editor(frame.drop(columns=["tenant_id"]), key="quota_table", hide_index=True,
                   disabled=["id", "tenant", "resource"])  # fmt: skip
    save_edits("quota_table", frame, "/admin/quotas", "quota_edit")
    for field in ("nominal", "borrowing_limit", "lending_limit", "period_s"):
        ui.field_error("quota_edit", field)
    ui.form_error("quota_edit")
    with st.form("quota_form"):
        st.caption("Change one quota")
        qid = st.selectbox("Quota", list(frame["id"]), key="qf_pick", format_func=lambda i: " ".join(
            str(v) for v in frame[frame["id"] == i][["tenant", "resource"]].iloc[0]))  # fmt: skip
        current = frame[frame["id"] == qid].iloc[0] if qid is not None else None
        nominal = st.number_input("Nominal", value=int(current["nominal"]) if current is not None else 0,
                                  step=1, key=f"qf_nominal_{qid}")  # fmt: skip
        ui.field_error("quota_form", "nominal")
        if st.form_submit_button("Save quota") and qid is not None:
            ui.attempt("quota_form", "PATCH", f"/admin/quotas/{qid}", {"nominal": int(nominal)},
                       ok="Quota saved.")  # fmt: skip
            st.rerun()
    ui.form_error("quota_form")
    snap = ui.live_or_notice()
    use = [{"tenant": t["tenant_id"], **q} for t in (snap or {}).get("tenancy", {}).get("tenants", [])
           for q in t.get("quota", [])] if snap else []  # fmt: skip
    if not use:
        st.caption("Current use comes from the live core, which is not running: nothing in use.")
        use = [{"tenant": names.get(q["tenant_id"]), "resource": q["resource"], "used": 0,
                "nominal": q["nominal"]} for q in quotas]  # fmt: skip
    else:
        st.caption("Use and quotas as the live core holds them (it reads quotas when it starts).")
    st.plotly_chart(charts.quota_bars(use), key="quota_use")

with tab_k:
    if issued := st.session_state.pop("issued_key", None):
        st.warning("Copy this key now: it is shown once and stored nowhere.")
        st.code(issued, language=None)
    who = st.selectbox("Tenant", list(names), format_func=names.get, key="key_tenant")
    keys = data.items("/admin/keys", tenant_id=who)
    kframe = pd.DataFrame(keys, columns=["id", "prefix", "label", "created_at", "revoked_at",
                                         "last_used_at"])  # fmt: skip
    st.dataframe(kframe, hide_index=True, key="key_table")
    label = st.text_input("Label of a new key", key="key_label")
    ui.field_error("key", "label")
    if st.button("Issue key", key="key_issue"):
        made = ui.attempt("key", "POST", f"/admin/tenants/{who}/keys", {"label": label})
        if made:
            st.session_state["issued_key"] = made["key"]
        st.rerun()
    live = [k["id"] for k in keys if not k["revoked_at"]]
    if live:
        rid = st.selectbox("Key to revoke", live, key="key_revoke_pick",
                           format_func=lambda i: next(f"{k['prefix']} {k['label']}" for k in keys if k["id"] == i))  # fmt: skip
        if st.button("Revoke", key="key_revoke"):
            ui.attempt("key", "POST", f"/admin/keys/{rid}/revoke", ok="Key revoked.")
            st.rerun()
    ui.form_error("key")

with tab_c:
    st.dataframe(pd.DataFrame(data.items("/admin/cohorts")), hide_index=True, key="cohorts")
    with st.form("cohort_new"):
        cname = st.text_input("Cohort name", key="co_name")
        ui.field_error("cohort_new", "name")
        if st.form_submit_button("Create cohort"):
            ui.attempt("cohort_new", "POST", "/admin/cohorts", {"name": cname},
                       ok=f"Cohort {cname!r} created.")  # fmt: skip
            st.rerun()
    ui.form_error("cohort_new")
