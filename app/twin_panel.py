"""Streamlit glue for twin predictions: start a what-if through the admin API, follow its
progress, and show its delta table with the twin's measured error beside every figure.

A page starts a run with :func:`start` under a name of its own (``form``) and calls
:func:`follow` with the same name on every run: while the twin works a fragment polls the run
once a second; when it ends the whole page reruns once and the results stay shown.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app import data, fidelity_stages, twin, ui
from app.client import ApiError


def fidelity() -> tuple[dict[str, Any] | None, str]:
    """The twin's latest fidelity report, or None and why there is none (cached briefly)."""
    try:
        return data.one("/admin/fidelity/latest"), ""
    except ApiError as err:
        if err.status == 404:
            return None, err.detail
        return None, f"fidelity reports unavailable: {err.detail}"


def twin_error_caption() -> None:
    """The twin's measured error in one line; a warning when it was never validated."""
    report, reason = fidelity()
    sentence = twin.twin_error_sentence(report, reason)
    if report is None:
        st.warning(sentence, icon=":material/help:")
    else:
        st.caption(sentence)


FIDELITY_FORM = "fidelity_run"


def validation_controls() -> None:
    """The twin's measured error, and a button asking the gateway to measure it again
    (``POST /admin/fidelity/runs``: about a minute in a worker process, stored as a fidelity
    report). The API's refusal (one already running, no runner on this gateway) is shown.
    A whole-DAG report also shows its figures per stage (``fidelity_stages``)."""
    twin_error_caption()
    fidelity_stages.show(fidelity()[0])
    if st.button("Measure the twin's error now", key="fid_run",
                 help="Replays a short trace slice through the live stack and through the "
                 "twin; the result becomes the error shown beside every prediction."):  # fmt: skip
        ui.attempt(FIDELITY_FORM, "POST", "/admin/fidelity/runs", {"repeats": 1},
                   ok="Validation started: the error above updates when it ends "
                   "(about a minute).")  # fmt: skip
    ui.form_error(FIDELITY_FORM)


def _run_key(form: str) -> str:
    return f"twin_run:{form}"


def _done_key(form: str) -> str:
    return f"twin_done:{form}"


def start(form: str, body: dict[str, Any], asked: Any = None) -> int | None:
    """POST the what-if ``body``; on success remember its run (and ``asked``, what it tried)
    for :func:`follow` and return its id; on refusal keep the API's error for ``form``."""
    made = ui.attempt(form, "POST", "/admin/whatif", body)
    if made is None:
        return None
    st.session_state[_run_key(form)] = made["id"]
    st.session_state[f"twin_asked:{form}"] = asked
    st.session_state.pop(_done_key(form), None)
    return int(made["id"])


def clear(form: str) -> None:
    """Forget the run followed for ``form`` (its change was saved: the preview is history)."""
    for key in (_run_key(form), _done_key(form), f"twin_asked:{form}"):
        st.session_state.pop(key, None)


def asked(form: str) -> Any:
    """What the followed run of ``form`` tried (as given to :func:`start`), or None."""
    return st.session_state.get(f"twin_asked:{form}")


@st.fragment(run_every=1.0)
def _progress(form: str, run_id: int) -> None:
    try:
        run = data.client().get(f"/admin/whatif/{run_id}")
    except ApiError as err:
        st.error(f"Twin run #{run_id}: {err.detail}")
        return
    if run["status"] in twin.FINAL:
        st.session_state[_done_key(form)] = run
        data.forget()  # lists of runs (and what the run changed) are stale now
        st.rerun()
    st.progress(run["progress_milli"] / 1000,
                text=f"Twin run #{run_id} {run['status']}: {run['progress_milli'] / 10:.0f}%")  # fmt: skip


def results(form: str, run: dict[str, Any]) -> None:
    """The finished run: its error, or verdicts, the delta table and the twin's error."""
    if run["status"] != "succeeded":
        st.error(f"Twin run #{run['id']} failed: {run.get('error')}")
        return
    comparisons = (run.get("results") or {}).get("comparisons") or []
    for comp in comparisons:
        st.markdown(f"**{comp.get('verdict', '')}**")
    report, _ = fidelity()
    st.dataframe(twin.delta_frame(comparisons, report), hide_index=True, key=f"{form}_deltas",
                 column_config={"ci95": st.column_config.NumberColumn("±95%", format="%.3g"),
                                "baseline": st.column_config.NumberColumn(format="%.3g"),
                                "variant": st.column_config.NumberColumn(format="%.3g"),
                                "delta": st.column_config.NumberColumn(format="%+.3g")})  # fmt: skip
    twin_error_caption()


def follow(form: str, show_results: bool = True) -> dict[str, Any] | None:
    """Show the run started for ``form``: progress while it runs, then (``show_results``)
    :func:`results`. Returns the finished run, or None while there is none or it still runs."""
    run_id = st.session_state.get(_run_key(form))
    if run_id is None:
        return None
    done = st.session_state.get(_done_key(form))
    if done is None or done["id"] != run_id:
        _progress(form, run_id)
        return None
    if show_results:
        results(form, done)
    return done
