"""API keys of the Tenants page: a tenant's keys with their state (active, expired, revoked),
issuing one with an optional expiry (its secret shown once, stored nowhere) and revoking one.
The API's refusal (a past expiry, a suspended tenant) is shown under the field it concerns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
import streamlit as st

from app import clock, data, ui
from app import tenancy_forms as tf

FORM = "key"
COLUMNS = ["id", "prefix", "label", "state", "created_at", "expires_at", "revoked_at",
           "last_used_at"]  # fmt: skip


def _issue(who: int) -> None:
    label = st.text_input("Label of a new key", key="key_label")
    ui.field_error(FORM, "label")
    expires = st.checkbox("Expires", key="key_expires",
                          help="from then on the key is refused with a 401 saying it expired")  # fmt: skip
    left, right = st.columns(2)
    soon = datetime.fromtimestamp(clock.now(), UTC) + timedelta(days=30)
    day = left.date_input("Expiry date (UTC)", value=soon.date(), key="key_exp_day",
                          disabled=not expires)  # fmt: skip
    at = right.time_input("Expiry time (UTC)", value=soon.time().replace(second=0, microsecond=0),
                          key="key_exp_time", disabled=not expires)  # fmt: skip
    ui.field_error(FORM, "expires_at")
    if st.button("Issue key", key="key_issue"):
        body = {"label": label, "expires_at": tf.expiry(expires, day, at)}
        made = ui.attempt(FORM, "POST", f"/admin/tenants/{who}/keys", body)
        if made:
            st.session_state["issued_key"] = made["key"]
        st.rerun()


def _revoke(keys: list[dict[str, Any]]) -> None:
    live = {k["id"]: f"{k['prefix']} {k['label']}" for k in keys if not k["revoked_at"]}
    if not live:
        return
    rid = st.selectbox("Key to revoke", list(live), key="key_revoke_pick", format_func=live.get)
    if st.button("Revoke", key="key_revoke"):
        ui.attempt(FORM, "POST", f"/admin/keys/{rid}/revoke", ok="Key revoked.")
        st.rerun()


def render(names: dict[int, str]) -> None:
    """Pick a tenant; its keys, issue one, revoke one."""
    if issued := st.session_state.pop("issued_key", None):
        st.warning("Copy this key now: it is shown once and stored nowhere.")
        st.code(issued, language=None)
    who = st.selectbox("Tenant", list(names), format_func=names.get, key="key_tenant")
    if who is None:
        st.caption("No tenant yet: create one on the Tenants tab.")
        return
    keys = data.items("/admin/keys", tenant_id=who)
    now = datetime.fromtimestamp(clock.now(), UTC)
    rows = [{**k, "state": tf.key_state(k, now)} for k in keys]
    st.dataframe(pd.DataFrame(rows, columns=COLUMNS), hide_index=True, key="key_table")
    _issue(who)
    _revoke(keys)
    ui.form_error(FORM)
