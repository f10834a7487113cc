"""Console sign-in per browser session (issue #22, item 9), in AppTest against the real API.

A session that presents nothing sees only the sign-in form, even where the old hand-over would
have signed it in (``LEGATO_ADMIN_TOKEN`` in the console's environment, ``var/admin_token``);
the admin credential signs it in; a one-time link signs in once and never again; a sign-in
expires; sign-out returns to the form. Also the ticket format of :mod:`app.links` itself.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from app import links
from tests.app.conftest import ADMIN_TOKEN, MAIN, signed_in

TENANTS = ("acme", "globex", "initech")
TEXT = ("title", "header", "subheader", "markdown", "caption", "text", "code", "info", "warning",
        "error", "success")  # fmt: skip
DATA = ("dataframe", "table", "metric", "json", "plotly_chart")


def _shown(at: AppTest) -> str:
    return "\n".join(str(e.value) for kind in TEXT for e in at.get(kind))


def assert_only_the_sign_in_form(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]
    assert "conn" not in at.session_state
    assert at.text_input(key="sign_in_token").label == "Admin credential"
    assert [b.label for b in at.button] == ["Sign in"]
    assert not [kind for kind in DATA if at.get(kind)], "data shown before sign-in"
    shown = _shown(at)
    assert not [t for t in TENANTS if t in shown], shown
    assert "Signed in" not in shown


@pytest.fixture
def var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The console's var dir, holding what the old console signed everyone in with."""
    (tmp_path / "admin_token").write_text(ADMIN_TOKEN + "\n")
    monkeypatch.setenv("LEGATO_VAR_DIR", str(tmp_path))
    monkeypatch.setenv("LEGATO_ADMIN_TOKEN", ADMIN_TOKEN)
    st.cache_data.clear()
    return tmp_path


def test_a_session_without_the_credential_sees_only_the_sign_in_form(console, var) -> None:
    console.run()
    assert_only_the_sign_in_form(console)
    for page in ("views/tenants.py", "views/usage.py"):  # no page is there before sign-in
        with pytest.raises(ValueError, match="Could not find a navigation page"):
            console.switch_page(page)


def test_the_admin_credential_signs_in_and_sign_out_returns_to_the_form(console, var) -> None:
    signed_in(console)
    assert "Signed in as admin" in _shown(console)
    console.button(key="sign_out").click().run()
    assert_only_the_sign_in_form(console)


def test_a_one_time_link_signs_in_once_and_never_again(console, var, api) -> None:
    token = links.issue(var, ADMIN_TOKEN, time.time())
    console.query_params["ticket"] = token
    console.run()
    assert not console.exception
    assert "conn" in console.session_state and "Signed in as admin" in _shown(console)
    assert "ticket" not in console.query_params  # taken out of the URL: a reload cannot reuse it
    again = AppTest.from_file(str(MAIN), default_timeout=30)
    again.query_params["ticket"] = token
    again.run()
    assert_only_the_sign_in_form(again)
    assert any("already used or has expired" in w.value for w in again.warning)


def test_an_expired_or_forged_link_signs_nothing_in(console, var) -> None:
    old = links.issue(var, ADMIN_TOKEN, time.time() - 2 * 3600)  # the default lifetime is 1 h
    for ticket in (old, "x" * 43, "../../admin_token", ""):
        at = AppTest.from_file(str(MAIN), default_timeout=30)
        at.query_params["ticket"] = ticket
        at.run()
        assert_only_the_sign_in_form(at)


def test_a_sign_in_expires(console, var, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEGATO_CONSOLE_SESSION_S", "2")
    signed_in(console)
    assert "conn" in console.session_state
    time.sleep(2.1)
    console.run()
    assert_only_the_sign_in_form(console)
    assert any("expired" in i.value for i in console.info)


def test_a_ticket_reveals_nothing_alone_and_is_private(tmp_path: Path) -> None:
    token = links.issue(tmp_path, "the-admin-credential", 1000.0)
    folder = tmp_path / links.TICKETS
    (ticket,) = folder.iterdir()
    assert "the-admin-credential" not in ticket.read_text() and token not in ticket.name
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(ticket).st_mode) == 0o600
    assert links.redeem(tmp_path, token, 1000.0 + 61, max_age_s=60) is None  # too old: gone
    assert not list(folder.iterdir())
    token = links.issue(tmp_path, "the-admin-credential", 1000.0)
    assert links.redeem(tmp_path, token[:-1] + ("A" if token[-1] != "A" else "B"), 1001, 60) is None
    assert links.redeem(tmp_path, token, 1001.0, 60) == "the-admin-credential"
    assert links.redeem(tmp_path, token, 1001.0, 60) is None


def test_the_developer_toolbar_is_hidden(console) -> None:
    """Streamlit's developer items (Deploy, rerun, clear cache) are not offered to operators."""
    st.set_option("client.toolbarMode", "auto")
    console.run()
    assert not console.exception
    assert st.get_option("client.toolbarMode") == "viewer"
