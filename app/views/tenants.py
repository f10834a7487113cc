"""Tenants and quotas, whole lifecycle: tenants (weight, priority class, status, cohort),
quotas of every kind the core knows (create, edit, delete), API keys (optional expiry, shown
once, revoke) and cohorts (create, delete). Changes that alter scheduling are previewed in the
twin first; saved ones reach the running core at once. The editors live in app/*_editor.py
and app/*_panel.py; this page only loads and lays them out."""

from __future__ import annotations

import streamlit as st

from app import cohort_panel, data, key_panel, quota_editor, tenant_editor, ui
from app.client import ApiError

ui.page_title(
    "Tenants and quotas",
    "Tenants, cohorts, quotas and API keys; each change is previewed in the twin and reaches the running core at once.",
)
try:
    tenants = data.items("/admin/tenants")
    cohort_rows = data.items("/admin/cohorts")
    quotas = data.items("/admin/quotas")
except ApiError as err:
    st.error(f"The API refused: {err.detail}")
    st.stop()
names = {t["id"]: t["name"] for t in tenants}
cohorts = {c["id"]: c["name"] for c in cohort_rows}

tab_t, tab_q, tab_k, tab_c = st.tabs(["Tenants", "Quotas", "API keys", "Cohorts"])
with tab_t:
    tenant_editor.render(tenants, cohorts)
with tab_q:
    quota_editor.render(tenants, quotas)
    quota_editor.use_chart(ui.live_or_notice(), quotas, names)
with tab_k:
    key_panel.render(names)
with tab_c:
    cohort_panel.render(cohort_rows, tenants)
