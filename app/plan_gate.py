"""The twin's gate of a placement plan, on the Models and placement page.

The API rolls out only a plan the twin has simulated (``POST /admin/placement-plans/{id}/
simulate`` replays the recent requests against the placement in force and against the plan,
and stores the report with the plan), unless the rollout is forced, which the audit log records.
Here: propose a plan from observed demand, start that replay (followed live while it runs),
show its stored report (current beside plan, overall and per tenant, with the twin's measured
error: ``app.plan_report``; the verdict; the caveat when the twin used its default latency
tables) and the force switch the rollout button sends.

Glue over the admin API; the report's tables are pure (``app.plan_figures``, unit-tested).
"""

from __future__ import annotations

import streamlit as st

from app import data, plan_report, ui

GATE, PROPOSE = "plan_gate", "plan_propose"  # where each refusal is shown


def propose() -> int | None:
    """Ask the API for a plan from the demand observed recently; the new plan's id."""
    made = ui.attempt(PROPOSE, "POST", "/admin/placement-plans/propose", {},
                      ok="Plan proposed from observed demand.")  # fmt: skip
    return made["id"] if made else None


def render(plan_id: int) -> bool:
    """The gate of ``plan_id``: its simulation, the button that starts one, and the force
    switch. Returns whether the rollout should be forced."""
    plan = data.client().get(f"/admin/placement-plans/{plan_id}")
    simulation = plan.get("simulation") or {}
    state = simulation.get("state")
    st.subheader(f"The twin's gate: plan #{plan_id} is {plan['status']}")
    if st.button("Replay recent traffic against this plan", key="plan_gate_sim",
                 icon=":material/replay:", disabled=state == "running",
                 help="the twin replays the recent requests against the placement in force "
                      "and this plan; a finished replay lets the plan roll out"):  # fmt: skip
        ui.attempt(GATE, "POST", f"/admin/placement-plans/{plan_id}/simulate", {},
                   ok=f"Replay of plan #{plan_id} started.")  # fmt: skip
        st.rerun()
    ui.form_error(GATE)
    if state == "running":
        plan_report.follow_replay(plan_id)
    elif state == "failed":
        st.error(f"The twin's replay failed: {simulation.get('error')}")
    elif state == "done":
        plan_report.beside(simulation)
        if simulation.get("caveat"):
            st.warning(simulation["caveat"], icon=":material/warning:")
    else:
        st.caption("Not simulated: the API refuses its rollout unless it is forced.")
    return st.checkbox("Force the rollout (recorded in the audit log)", key="plan_force",
                       disabled=state == "done")  # fmt: skip
