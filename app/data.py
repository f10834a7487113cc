"""Loaders: the API's answers as DataFrames, cached briefly, and mutations that clear the cache.

Pages call these and nothing else to reach the control plane. The connection (API URL and the
signed-in credential) lives in the Streamlit session; cached answers are keyed by it, so two
operators never see each other's cache entries under different credentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from app import clock
from app.client import ApiClient, ApiError
from app.settings import ConsoleSettings, read_settings

CACHE_TTL_S = 5.0


@dataclass(frozen=True)
class Conn:
    """Where and as whom the console talks to the API."""

    api_url: str
    token: str


def settings() -> ConsoleSettings:
    if "console_settings" not in st.session_state:
        st.session_state["console_settings"] = read_settings()
    return st.session_state["console_settings"]


#: session_state key: when this session's sign-in ends (epoch seconds, see app/session.py).
UNTIL = "signed_in_until"


def conn() -> Conn:
    """The signed-in connection; pages run only after sign-in (app/main.py enforces it, and so
    does this: a page script run without the main script, or after the sign-in ended, gets no
    credential)."""
    found = st.session_state.get("conn")
    if found is None or clock.now() >= st.session_state.get(UNTIL, 0.0):
        raise RuntimeError("not signed in")
    return found


@st.cache_resource(show_spinner=False)
def _client(api_url: str, token: str) -> ApiClient:
    return ApiClient(api_url, token)


def client() -> ApiClient:
    c = conn()
    return _client(c.api_url, c.token)


def sign_in(api_url: str, token: str, until: float) -> None:
    """Check ``token`` against the API and keep the connection until ``until`` (epoch
    seconds); raises ApiError if refused."""
    ApiClient(api_url, token).check_admin()
    st.session_state["conn"] = Conn(api_url, token)
    st.session_state[UNTIL] = until


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _items(api_url: str, token: str, path: str, params: tuple[tuple[str, Any], ...]) -> list:
    return _client(api_url, token).list_all(path, **dict(params))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _one(api_url: str, token: str, path: str, params: tuple[tuple[str, Any], ...]) -> Any:
    return _client(api_url, token).get(path, **dict(params))


def items(path: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of an admin list route (cached for a few seconds)."""
    c = conn()
    return _items(c.api_url, c.token, path, tuple(sorted(params.items())))


def table(path: str, columns: list[str] | None = None, **params: Any) -> pd.DataFrame:
    """A list route as a DataFrame; ``columns`` fixes the columns even when it is empty."""
    rows = items(path, **params)
    frame = pd.DataFrame(rows)
    if columns is not None:
        frame = frame.reindex(columns=columns)
    return frame


def one(path: str, **params: Any) -> Any:
    c = conn()
    return _one(c.api_url, c.token, path, tuple(sorted(params.items())))


def live_snapshot() -> dict[str, Any]:
    """The core's live snapshot (never cached; ApiError 503 when no runtime runs)."""
    return client().get("/admin/snapshot")


def mutate(method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One change through the API. Clears the cached answers when it succeeds; raises
    ApiError (and changes nothing here) when the API refuses it."""
    result = client().request(method, path, json=body) if body is not None else \
        client().request(method, path)  # fmt: skip
    forget()
    return result


def forget() -> None:
    """Drop every cached answer (after a change, or when a background job has ended)."""
    _items.clear()
    _one.clear()


def by_id(path: str, key: str = "name") -> dict[int, str]:
    """``{id: name}`` of a resource, for showing names instead of ids."""
    return {row["id"]: row[key] for row in items(path)}


__all__ = ["ApiError", "Conn", "by_id", "client", "conn", "forget", "items", "live_snapshot", "mutate",
           "one", "settings", "sign_in", "table"]  # fmt: skip


def run_as_tenant(tenant_id: int, workflow: str, version: str, inputs: dict) -> dict[str, Any]:
    """A test run of a workflow on behalf of ``tenant_id``: issues a short-lived key labelled
    ``console test run`` (audited), runs synchronously with it, revokes it, and returns the run
    with its per-node ledger entries (tokens, device time) under ``nodes``."""
    key = mutate("POST", f"/admin/tenants/{tenant_id}/keys", {"label": "console test run"})
    try:
        tenant = ApiClient(conn().api_url, key["key"], timeout_s=120.0)
        try:
            path = f"/v1/workflows/{workflow}/versions/{version}/runs"
            run = tenant.post(path, {"inputs": inputs, "mode": "sync", "timeout_s": 110})
        finally:
            tenant.close()
    finally:
        mutate("POST", f"/admin/keys/{key['id']}/revoke")
    ledger = client().get("/admin/usage", request_id=run["id"], limit=1000)
    run["nodes"] = ledger["items"]
    return run
