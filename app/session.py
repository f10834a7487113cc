"""Sign-in of one browser session: by the admin credential or a one-time link; expiry; sign-out.

No browser session is signed in unless it presented the credential: typed into the sign-in form,
or unsealed from a one-time ticket whose token it brought in the URL (``?ticket=...``, see
:mod:`app.links`). Either way the credential is checked against the API before the session
counts as signed in, and the session then talks to the API with it alone. A sign-in lasts
``session_s`` seconds (:mod:`app.settings`); after that, and after sign-out, the session is back
at the sign-in form and holds no credential. Everything lives in ``st.session_state``, which
belongs to one browser tab's connection: a new tab (or a reload) signs in anew.
"""

from __future__ import annotations

import streamlit as st

from app import clock, data, links
from app.client import ApiError

#: session_state keys this module owns (the sign-in's end is data.UNTIL).
UNTIL = data.UNTIL
NOTICE = "sign_in_notice"


def signed_in() -> bool:
    """True while this session holds a checked credential whose sign-in has not expired; an
    expired one is dropped here (and the form then says why)."""
    if "conn" not in st.session_state:
        return False
    if clock.now() < st.session_state.get(UNTIL, 0.0):
        return True
    sign_out()
    st.session_state[NOTICE] = ("info", "Your sign-in expired: sign in again.")
    return False


def sign_in_with(token: str) -> None:
    """Check ``token`` against the API and sign this session in with it; ApiError if refused
    (the session then stays signed out)."""
    settings = data.settings()
    data.sign_in(settings.api_url, token, clock.now() + settings.session_s)


def redeem_link() -> None:
    """Sign in with the one-time ticket named in the URL, if any, and take it out of the URL
    (a reload must not present it again). A used, expired or unknown ticket signs nothing in."""
    ticket = st.query_params.get("ticket")
    if ticket is None:
        return
    del st.query_params["ticket"]
    settings = data.settings()
    credential = links.redeem(settings.var_dir, ticket, clock.now(), settings.link_ttl_s)
    if credential is None:
        st.session_state[NOTICE] = (
            "warning",
            "This sign-in link was already used or has expired: sign in with the admin credential.",
        )
        return
    try:
        sign_in_with(credential)
    except ApiError as err:
        st.session_state[NOTICE] = ("warning", f"The link's credential was refused: {err.detail}")


def sign_out() -> None:
    """Forget this session's credential (the cached answers stay keyed by it, out of reach of
    a session that does not present it)."""
    st.session_state.pop("conn", None)
    st.session_state.pop(UNTIL, None)


def show_notice() -> None:
    """Show, once, why the session is at the sign-in form (expired, link refused)."""
    found = st.session_state.pop(NOTICE, None)
    if found is not None:
        kind, message = found
        (st.warning if kind == "warning" else st.info)(message)
