"""Cohorts of the Tenants page: tenants in one cohort lend and borrow idle quota. Create one,
delete one (the API refuses while tenants are in it: move them out on the Tenants tab first)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app import ui

FORM = "cohort"


def render(cohorts: list[dict[str, Any]], tenants: list[dict[str, Any]]) -> None:
    """The cohorts with their members, a create form and a delete button."""
    members = {c["id"]: [t["name"] for t in tenants if t["cohort_id"] == c["id"]] for c in cohorts}
    rows = [{**c, "tenants": ", ".join(members[c["id"]])} for c in cohorts]
    st.dataframe(pd.DataFrame(rows, columns=["id", "name", "description", "tenants"]),
                 hide_index=True, key="cohorts")  # fmt: skip
    with st.form("cohort_new"):
        name = st.text_input("Cohort name", key="co_name")
        ui.field_error(FORM, "name")
        description = st.text_input("Description", key="co_desc")
        ui.field_error(FORM, "description")
        if st.form_submit_button("Create cohort"):
            ui.attempt(FORM, "POST", "/admin/cohorts", {"name": name, "description": description},
                       ok=f"Cohort {name!r} created.")  # fmt: skip
            st.rerun()
    names = {c["id"]: c["name"] for c in cohorts}
    if names:
        gone = st.selectbox("Cohort to delete", list(names), format_func=names.get,
                            key="co_delete_pick")  # fmt: skip
        if st.button("Delete cohort", key="co_delete", icon=":material/delete:"):
            ui.attempt(
                FORM, "DELETE", f"/admin/cohorts/{gone}", ok=f"Cohort {names[gone]!r} deleted."
            )
            st.rerun()
    ui.form_error(FORM)
