"""The Workflows page's draft: one spec that the canvas, the side panel and the YAML view all
edit, kept in the Streamlit session until it is saved as a version.

Every change goes through :func:`replace`, which bumps ``rev``; widgets built from the draft
(the canvas, the YAML text) are rebuilt when ``rev`` moves, and the API's validation report is
fetched once per ``rev`` so problems show on the nodes while editing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from app import data
from app.client import ApiError

KEY = "wf_draft"
#: New workflows' drafts not saved yet, by name: kept while another workflow is shown, so that
#: picking one again (or a rerun that briefly showed another) never loses its edits.
UNSAVED = "wf_unsaved"


@dataclass
class Draft:
    """``name``/``base`` (the version it was loaded from; None: not saved yet) and its spec."""

    name: str
    base: str | None
    spec: dict[str, Any]
    rev: int = 0
    report: dict[str, Any] | None = field(default=None, repr=False)


def current() -> Draft | None:
    return st.session_state.get(KEY)


def start(draft: Draft) -> None:
    """Open ``draft``, a new workflow's (``base`` None), and keep it until it is saved."""
    st.session_state[KEY] = draft
    st.session_state.setdefault(UNSAVED, {})[draft.name] = draft


def unsaved_names(saved: list[str]) -> list[str]:
    """Names of kept drafts not saved yet (those saved meanwhile are dropped)."""
    kept = st.session_state.setdefault(UNSAVED, {})
    for name in [n for n in kept if n in saved]:
        del kept[name]
    return sorted(kept)


def resume(name: str) -> Draft:
    """Open the kept unsaved draft ``name`` again, edits and all (a new ``rev``, so views
    built for the draft shown before are rebuilt)."""
    draft = st.session_state[UNSAVED][name]
    found = current()
    if found is not draft:
        draft.rev = max(draft.rev, found.rev if found is not None else 0) + 1
        st.session_state[KEY] = draft
    return draft


def load(name: str, version: str | None, spec: dict[str, Any]) -> Draft:
    """The draft of ``name`` at ``version``: kept when it already is that one (edits stay),
    otherwise a fresh copy of ``spec``."""
    found = current()
    if found is not None and (found.name, found.base) == (name, version):
        return found
    rev = found.rev + 1 if found is not None else 0
    fresh = Draft(name, version, dict(spec), rev)
    st.session_state[KEY] = fresh
    return fresh


def replace(spec: dict[str, Any]) -> None:
    """Make ``spec`` the draft (a new ``rev``: views rebuild, validation runs again)."""
    draft = current()
    if draft is None:
        raise RuntimeError("no workflow draft is open")
    draft.spec, draft.rev, draft.report = spec, draft.rev + 1, None


def report(draft: Draft) -> dict[str, Any]:
    """The API's validation of the draft (``valid`` and ``problems`` with their locations),
    asked once per revision; a refusal of the request itself becomes a workflow-wide problem."""
    if draft.report is None:
        try:
            draft.report = data.client().post("/admin/workflows/validate", {"spec": draft.spec})
        except ApiError as err:
            found = [{"location": p.location, "message": p.message} for p in err.problems]
            draft.report = {"valid": False,
                            "problems": found or [{"location": "", "message": err.detail}]}  # fmt: skip
    return draft.report
