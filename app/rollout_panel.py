"""Rollouts of placement plans on the live fleet, from the Models and placement page: start a
rollout or a rollback through the admin API and follow its progress while it runs.

``progress_of`` is pure (unit-tested); ``panel``, ``roll_out`` and ``roll_back`` are glue. The
API reports a plan's rollout (``GET /admin/placement-plans/{id}/rollout``: phase, state, steps
done of steps needed, the step under way, loads blocked for memory, errors, the audited
transitions); the plan's own status moves to ``active`` (or ``rolled_back``) when it ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from app import data, ui
from app.client import ApiError

FORM, BACK = "rollout", "rollback"  # where each refusal is shown: by its own button
RUNNING = ("loading", "draining")


def progress_of(p: Mapping[str, Any]) -> tuple[float, str]:
    """(fraction done, one sentence) of a plan's rollout progress as the API reports it
    (``GET /admin/placement-plans/{id}/rollout``): steps done of the steps needed, the state
    and the step under way; loads waiting for memory are named."""
    plan = p.get("plan_id", "?")
    if p.get("phase") is None:
        return 0.0, f"Plan #{plan} has not been rolled out."
    state = str(p.get("state"))
    done, total = p.get("steps_done"), p.get("steps_total")
    if state == "completed":
        fraction = 1.0
    else:
        fraction = min(1.0, done / total) if done is not None and total else 0.0
    kind = "Rollback" if p.get("phase") == "rollback" else "Rollout"
    text = f"{kind} of plan #{plan}: {state}"
    if total:
        text += f", step {done} of {total}"
    if p.get("current_step") and state in RUNNING:
        text += f" - {p['current_step']}"
    if p.get("blocked"):
        text += f"; waiting for memory: {', '.join(p['blocked'])}"
    return fraction, text


def followed(active_id: int | None) -> int | None:
    """The plan whose rollout the page follows: the last one rolled out or back from this
    console, else the active plan."""
    return st.session_state.get("rollout_plan", active_id)


def progress(plan_id: int | None) -> dict[str, Any] | None:
    """The plan's rollout progress now (never cached), or None without a plan or an answer."""
    if plan_id is None:
        return None
    try:
        return data.client().get(f"/admin/placement-plans/{plan_id}/rollout")
    except ApiError:
        return None


def can_roll_back(p: Mapping[str, Any] | None) -> bool:
    """Whether the plan's last rollout completed (only then is there a placement to go back
    to; the API refuses otherwise)."""
    return p is not None and p.get("phase") == "rollout" and p.get("state") == "completed"


@st.fragment(run_every=1.0)
def panel(plan_id: int | None) -> None:
    """Progress of ``plan_id``'s rollout (refreshed every second) and the live replicas."""
    if plan_id is not None:
        try:
            progress = data.client().get(f"/admin/placement-plans/{plan_id}/rollout")
        except ApiError as err:
            st.error(f"Rollout progress of plan #{plan_id}: {err.detail}")
            return
        _show(progress)
    try:
        replicas = data.live_snapshot().get("replicas") or []
    except ApiError as err:
        st.info(f"Rollouts need the live runtime: {err.detail}")
        return
    with st.expander(f"{len(replicas)} live replica(s)"):
        st.dataframe(pd.DataFrame(replicas), hide_index=True, key="live_replicas")


def _show(progress: Mapping[str, Any]) -> None:
    fraction, text = progress_of(progress)
    st.progress(fraction, text=text)
    for error in progress.get("errors") or ():
        st.error(error, icon=":material/error:")
    if not progress.get("live") and progress.get("phase") is not None:
        st.caption("From the audit log: the live runtime is not running this rollout now.")
    if progress.get("transitions"):
        with st.expander(f"Plan #{progress['plan_id']} is {progress['plan_status']}: "
                         f"{len(progress['transitions'])} transition(s)"):  # fmt: skip
            st.dataframe(pd.DataFrame(progress["transitions"]), hide_index=True,
                         key="rollout_transitions")  # fmt: skip
    was = st.session_state.get("rollout_state")
    st.session_state["rollout_state"] = progress.get("state")
    if was in RUNNING and progress.get("state") not in RUNNING:
        data.forget()  # the plans' statuses changed with the end of the rollout
        st.rerun()


def roll_out(plan_id: int, force: bool = False) -> None:
    """Ask the API to roll ``plan_id`` out on the live fleet (refusal kept for the page);
    ``force``: even though the twin did not simulate it (the audit log says so)."""
    body = {"force": True} if force else None
    started = ui.attempt(FORM, "POST", f"/admin/placement-plans/{plan_id}/rollout", body,
                         ok=f"Rollout of plan #{plan_id} started.")  # fmt: skip
    if started is not None:
        st.session_state["rollout_plan"] = plan_id
        st.session_state["rollout_state"] = "loading"


def roll_back(plan_id: int | None) -> None:
    """Ask the API to roll ``plan_id`` back (its previous placement is restored the same safe
    way); without a plan, whatever rollout completed last."""
    path = "/admin/placement-plans/" + (
        f"{plan_id}/rollback" if plan_id is not None else "rollback"
    )
    done = ui.attempt(BACK, "POST", path, ok="Rollback requested.")
    if done is not None:
        if plan_id is not None:
            st.session_state["rollout_plan"] = plan_id
        st.session_state["rollout_state"] = "loading"
