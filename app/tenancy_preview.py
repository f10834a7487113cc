"""Previews of tenancy changes in the twin: the change an editor would save (a quota created,
edited or deleted; a tenant's weight, class, cohort or status) as a what-if variant
(``quota_set`` / ``tenant_set``) against the state in force now, on a short slice of a stored
trace. The API checks the change as the save would, so a refusal names the editor's field."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app import data, twin, twin_panel, ui
from app.client import ApiError

PREVIEW_SEEDS, PREVIEW_REQUESTS = 2, 100


def trace_picker(form: str) -> str | None:
    """The stored trace to preview on (None: the twin's default slice)."""
    try:
        traces = [t["name"] for t in data.items("/admin/traces")]
    except ApiError as err:
        st.caption(f"Stored traces unavailable ({err.detail}): previews use the twin's default.")
        return None
    return st.selectbox("Preview on trace", traces, key=f"{form}_trace",
                        help=f"{PREVIEW_REQUESTS} requests of it, {PREVIEW_SEEDS} seeds")  # fmt: skip


def preview(form: str, name: str, knob: str, change: dict[str, Any], trace: str | None) -> None:
    """Start the twin on ``change`` (one item of ``knob``); rerun to show a refusal by its field."""
    request = twin.preview_request(name, {knob: [change]}, trace, PREVIEW_SEEDS, PREVIEW_REQUESTS)
    if twin_panel.start(form, request, asked=change) is None:
        st.rerun()


def follow(form: str, change: dict[str, Any] | None) -> None:
    """The preview's progress or result, and a warning once the fields moved on from it."""
    if twin_panel.asked(form) not in (None, change):
        st.caption("The fields changed since this preview: preview again before saving.")
    twin_panel.follow(form)


def saved(form: str) -> None:
    """After a successful save: the preview of the change no longer needs showing."""
    if ui.error_of(form) is None:
        twin_panel.clear(form)
