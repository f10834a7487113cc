"""Streamlit glue of a plan's twin report on the Models and placement page: the plan beside
the placement in force (overall and per tenant, a table and a grouped bar chart), the replay
followed live while the twin works, and what the observer saw after a rollout (observed beside
predicted p50/p99, and its flag). Every prediction carries the twin's measured error from the
newest fidelity report (``GET /admin/fidelity/latest``), or says that there is none.

Figures and sentences come from :mod:`app.plan_figures` (pure); this module only reads the API
and draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from app import data, plan_figures, twin_panel
from app.client import ApiError

HEADLINE = ("p50_s", "p99_s", "slo_attainment")


def _number(fmt: str) -> Any:
    return st.column_config.NumberColumn(format=fmt)


def beside(simulation: Mapping[str, Any]) -> None:
    """The finished report: headline figures with the twin's error, the per-tenant table and
    the grouped bars of the figure the operator picks."""
    report, reason = twin_panel.fidelity()
    plan = simulation.get("plan") or {}
    headline = [plan_figures.bounded(f, plan.get(f), report) for f in HEADLINE]
    st.markdown("**The plan as the twin predicts it:** " + "; ".join(headline))
    source = plan_figures.error_source(report, reason)
    st.caption(f"Every prediction here: {source}.")
    frame = plan_figures.beside_frame(simulation, report)
    st.dataframe(frame, hide_index=True, key="plan_beside", column_config={
        "current": _number("%.4g"), "plan": _number("%.4g"), "change": _number("%+.3g"),
        "twin_error": st.column_config.TextColumn("twin error")})  # fmt: skip
    figure = st.radio("Chart", list(plan_figures.FIGURES)[:4], index=1, horizontal=True,
                      format_func=plan_figures.FIGURES.get, key="plan_chart_figure")  # fmt: skip
    st.plotly_chart(plan_figures.grouped_bars(simulation, figure, report), key="plan_bars")
    workload = simulation.get("workload") or {}
    count = f" ({workload['requests']} requests)" if workload.get("requests") else ""
    st.caption(f"Replayed: {workload.get('source', '?')}{count}; verdict: "
               f"{simulation.get('verdict')}")  # fmt: skip


@st.fragment(run_every=1.0)
def follow_replay(plan_id: int) -> None:
    """While the twin replays: poll the plan each second; when the replay ends, rerun the
    page once (the gate then shows the report and the plan's new status)."""
    try:
        plan = data.client().get(f"/admin/placement-plans/{plan_id}")
    except ApiError as err:
        st.error(f"Plan #{plan_id}: {err.detail}")
        return
    state = (plan.get("simulation") or {}).get("state")
    if state != "running":
        data.forget()
        st.rerun()
    st.info(f"The twin is replaying recent traffic against plan #{plan_id}...",
            icon=":material/hourglass_top:")  # fmt: skip


def _observed(observation: Mapping[str, Any], flagged: bool) -> None:
    report, reason = twin_panel.fidelity()
    st.dataframe(plan_figures.observation_rows(observation, report), hide_index=True,
                 key="plan_observed",
                 column_config={"twin_error": st.column_config.TextColumn("twin error")})  # fmt: skip
    st.caption(f"Predictions: {plan_figures.error_source(report, reason)}. The flag's bound "
               f"{plan_figures.value_text('p99_s', observation.get('bound_p99_s'))} used "
               f"{observation.get('twin_error_source')} and margin {observation.get('margin')}.")  # fmt: skip
    if flagged:
        rolled = " and was rolled back" if observation.get("rolled_back") else ""
        st.error(f"Flagged{rolled}: {observation.get('reason')}", icon=":material/flag:")
    else:
        st.success(f"Not flagged: {observation.get('reason')}", icon=":material/check:")


@st.fragment(run_every=2.0)
def observation(plan_id: int | None) -> None:
    """What the observer recorded for ``plan_id`` after its rollout (refreshed every 2 s)."""
    if plan_id is None:
        return
    try:
        plan = data.client().get(f"/admin/placement-plans/{plan_id}")
    except ApiError as err:
        st.error(f"Plan #{plan_id}: {err.detail}")
        return
    seen = plan.get("observation") or {}
    state = seen.get("state")
    if state is None:
        st.caption(f"Plan #{plan_id}: no observation yet (the observer starts when a rollout "
                   "started here completes).")  # fmt: skip
    elif state == "observing":
        st.info(f"Observing plan #{plan_id} live for {seen.get('window_s')} s since "
                f"{str(seen.get('since'))[:19]}: observed p50/p99 then shown beside the "
                "prediction.", icon=":material/visibility:")  # fmt: skip
    elif state == "abandoned":
        st.warning(f"Plan #{plan_id} was not observed: {seen.get('reason')}")
    else:
        st.markdown(f"**Plan #{plan_id} after its rollout: observed beside predicted**")
        _observed(seen, bool(plan.get("flagged")))
