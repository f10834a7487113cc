"""The console's entry point: sign in with the admin credential, then the pages by section.

Run with ``streamlit run app/main.py`` (``legato console`` does it with the API URL in the
environment, never a credential). A browser session sees only the sign-in form until it
presents the admin credential, typed in or through a one-time link (app/session.py). Every page
reaches the control plane only through the admin API (app/client.py), with the credential the
session presented; nothing here imports the control plane.
"""

from __future__ import annotations

import sys
from pathlib import Path

# ``streamlit run app/main.py`` puts app/ first on sys.path; pages import ``app.*``.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402

from app import data, session  # noqa: E402
from app.client import ApiError  # noqa: E402

# Not "pages": Streamlit takes a pages/ folder beside the main script for its old multipage mode
# and may then run a page script without this one, and without its sign-in gate.
PAGES = Path(__file__).parent / "views"
SECTIONS: dict[str, list[tuple[str, str, str]]] = {
    "Operate": [("overview.py", "Overview", ":material/dashboard:"),
                ("fairshare.py", "Fair share, live", ":material/balance:")],
    "Fleet": [("devices.py", "Devices and headroom", ":material/memory:"),
              ("placement.py", "Models and placement", ":material/grid_view:")],
    "Workloads": [("workflows.py", "Workflows", ":material/account_tree:"),
                  ("tenants.py", "Tenants and quotas", ":material/groups:")],
    "Analyse": [("whatif.py", "What-if", ":material/science:"),
                ("usage.py", "Usage and audit", ":material/receipt_long:"),
                ("timeline.py", "Request timeline", ":material/timeline:")],
}  # fmt: skip


def _sign_in_page() -> None:
    """The one page a session that is not signed in sees: no data of the control plane."""
    st.title("Legato console")
    st.caption(f"Admin API: {data.settings().api_url}")
    session.show_notice()
    with st.form("sign_in"):
        token = st.text_input("Admin credential", type="password", key="sign_in_token")
        submitted = st.form_submit_button("Sign in", type="primary")
    if submitted:
        try:
            session.sign_in_with(token.strip())
        except ApiError as err:
            st.error(f"Sign-in refused: {err.detail}")
            return
        st.rerun()


def main() -> None:
    st.set_page_config(page_title="Legato console", page_icon=":material/hub:", layout="wide")
    # an operator's console, not a Streamlit app under development: no Deploy, rerun or cache
    # items in the toolbar (the viewer's print and theme remain)
    st.set_option("client.toolbarMode", "viewer")
    session.redeem_link()
    if not session.signed_in():
        st.navigation([st.Page(_sign_in_page, title="Sign in", url_path="sign-in")]).run()
        return
    pages = {section: [st.Page(PAGES / f, title=t, icon=i) for f, t, i in entries]
             for section, entries in SECTIONS.items()}  # fmt: skip
    with st.sidebar:
        st.caption(f"Signed in as admin at {data.conn().api_url}")
        if st.button("Sign out", key="sign_out"):
            session.sign_out()
            st.rerun()
    st.navigation(pages).run()


main()
