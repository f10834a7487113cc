"""Streamlit helpers shared by pages: mutations that keep the API's refusal next to the field
it concerns, the standard "runtime not running" notice, and each page's title with its one-line
purpose."""

from __future__ import annotations

from typing import Any

import streamlit as st

from app import data
from app.client import ApiError


def page_title(title: str, purpose: str) -> None:
    """The page's heading and, under it, one line saying what the page is for (item 6 of the
    console's round 2: an operator landing on a page knows at once why it is there)."""
    st.title(title)
    st.caption(purpose)


def _err_key(form: str) -> str:
    return f"err:{form}"


def attempt(form: str, method: str, path: str, body: dict | None = None, ok: str = "") -> Any:
    """Send one change. On refusal keep the API's error for ``form`` (shown by
    :func:`field_error`/:func:`form_error` on the next run) and return None; on success forget
    any earlier error, remember ``ok`` as the confirmation and return the API's answer."""
    try:
        result = data.mutate(method, path, body)
    except ApiError as err:
        remember(form, err)
        return None
    remember(form, None, ok)
    return result


def remember(form: str, err: ApiError | None, ok: str = "") -> None:
    """Keep the outcome of an attempt for ``form``: the API's refusal, or the confirmation
    ``ok`` (an empty one keeps the earlier confirmation)."""
    if err is not None:
        st.session_state[_err_key(form)] = err
        st.session_state.pop(f"ok:{form}", None)
        return
    st.session_state.pop(_err_key(form), None)
    if ok:
        st.session_state[f"ok:{form}"] = ok


def error_of(form: str) -> ApiError | None:
    return st.session_state.get(_err_key(form))


def field_error(form: str, name: str) -> None:
    """Under a widget: the API's messages about field ``name`` from the last attempt."""
    err = error_of(form)
    if err is not None:
        for message in err.about(name):
            st.error(f"{name}: {message}", icon=":material/error:")


def form_error(form: str) -> None:
    """The API's refusal of the last attempt (its detail sentence), or the confirmation."""
    err = error_of(form)
    if err is not None:
        st.error(f"Refused by the API ({err.status} {err.error}): {err.detail}")
    elif message := st.session_state.get(f"ok:{form}"):
        st.success(message)


def live_or_notice() -> dict | None:
    """The live snapshot, or None after telling the operator why there is none."""
    try:
        return data.live_snapshot()
    except ApiError as err:
        st.info(f"Live figures unavailable: {err.detail}")
        return None


def names(path: str) -> dict[int, str]:
    """``{id: name}`` of a resource, empty when the API refuses (the page shows ids)."""
    try:
        return data.by_id(path)
    except ApiError:
        return {}
