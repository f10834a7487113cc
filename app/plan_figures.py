"""Pure tables, charts and sentences of a placement plan's twin report beside the placement in
force, every predicted figure with the twin's measured error. No Streamlit, no I/O.

A plan's stored ``simulation`` (``POST /admin/placement-plans/{id}/simulate``) holds, when its
``state`` is ``done``, the figures of the placement in force (``current``) and of the plan
(``plan``): ``p50_s``, ``p99_s``, ``throughput_rps``, ``slo_attainment``, ``requests``, and the
same per tenant under ``tenants``. The twin's error comes from the newest fidelity report
(``GET /admin/fidelity/latest``: ``p50_error``/``p99_error`` as fractions of the live figure,
``slo_attainment_error_pp`` in percentage points); None when none is stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go

#: Figure of a report -> how the console names it (in this order).
FIGURES: dict[str, str] = {
    "p50_s": "p50 latency",
    "p99_s": "p99 latency",
    "throughput_rps": "throughput",
    "slo_attainment": "SLO attainment",
    "requests": "requests",
}
#: Figure -> its row label in the report table, with the unit of the raw value shown there.
TABLE_LABELS: dict[str, str] = {
    "p50_s": "p50 latency (s)",
    "p99_s": "p99 latency (s)",
    "throughput_rps": "throughput (req/s)",
    "slo_attainment": "SLO attainment (0-1)",
    "requests": "requests",
}
#: Figure -> the fidelity report's error that bounds it (figures absent: not measured).
ERROR_OF: dict[str, str] = {
    "p50_s": "p50_error",
    "p99_s": "p99_error",
    "slo_attainment": "slo_attainment_error_pp",
}
ALL = "all tenants"
COLUMNS = ["tenant", "figure", "current", "plan", "change", "twin_error"]
SIDES = ("current", "plan")


def error_size(report: Mapping[str, Any] | None, figure: str) -> str:
    """How far the twin was from the live stack for ``figure``: ``±6%``, ``±1.2 pp``, ``not
    measured`` (a figure no validation compares) or ``not validated`` (no report)."""
    if report is None:
        return "not validated"
    key = ERROR_OF.get(figure)
    if key is None or report.get(key) is None:
        return "not measured"
    value = abs(float(report[key]))  # the SLO error is signed (twin minus live): its size
    return f"±{value:.1f} pp" if key.endswith("_pp") else f"±{value * 100:.0f}%"


def error_source(report: Mapping[str, Any] | None, reason: str = "") -> str:
    """Where the error comes from: ``twin error measured on <trace> (<workflow> workflow, load
    <load>), <date>`` (the parenthesis where the report names them), or that no fidelity
    report exists (``reason``: the API's explanation)."""
    if report is None:
        return f"{reason or 'no fidelity report'}; the twin's error is unknown"
    day = str(report.get("created_at", ""))[:16].replace("T", " ")
    what = [f"{report['workflow']} workflow"] if report.get("workflow") else []
    if isinstance(report.get("load"), int | float):
        what.append(f"load {report['load']:g}")
    ran = f" ({', '.join(what)})" if what else ""
    return f"twin error measured on {report.get('trace', '?')}{ran}, {day}"


def value_text(figure: str, value: Any) -> str:
    """A figure in the console's units: latency in ms, throughput in req/s, SLO in %."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "-"
    v = float(value)
    if figure.endswith("_s"):
        return f"{v * 1000:.0f} ms"
    if figure == "throughput_rps":
        return f"{v:.2f} req/s"
    if figure == "slo_attainment":
        return f"{v * 100:.1f}%"
    return f"{v:.0f}"


def bounded(figure: str, value: Any, report: Mapping[str, Any] | None) -> str:
    """A prediction with the twin's error bound, e.g. ``p99 latency 312 ms ±6%`` (no bound
    when the error is not measured or the twin was never validated)."""
    size = error_size(report, figure)
    bound = "" if size in ("not measured", "not validated") else f" {size}"
    return f"{FIGURES.get(figure, figure)} {value_text(figure, value)}{bound}"


def with_error(figure: str, value: Any, report: Mapping[str, Any] | None,
               reason: str = "") -> str:  # fmt: skip
    """:func:`bounded` and where the error comes from, e.g. ``p99 latency 312 ms ±6% (twin
    error measured on azure-slice, 2026-12-01 10:00)``."""
    return f"{bounded(figure, value, report)} ({error_source(report, reason)})"


def done(simulation: Mapping[str, Any] | None) -> bool:
    return bool(simulation) and simulation.get("state") == "done"


def tenants_of(simulation: Mapping[str, Any] | None) -> list[str]:
    """The tenants either side of a finished report names, sorted."""
    if not done(simulation):
        return []
    names: set[str] = set()
    for side in SIDES:
        names.update(((simulation.get(side) or {}).get("tenants") or {}).keys())
    return sorted(names)


def _side(simulation: Mapping[str, Any], side: str, tenant: str) -> Mapping[str, Any]:
    figures = simulation.get(side) or {}
    if tenant == ALL:
        return figures
    return (figures.get("tenants") or {}).get(tenant) or {}


def _change(current: Any, plan: Any) -> float | None:
    if current is None or plan is None:
        return None
    return float(plan) - float(current)


def beside_frame(simulation: Mapping[str, Any] | None,
                 report: Mapping[str, Any] | None) -> pd.DataFrame:  # fmt: skip
    """One row per (tenant, figure): all tenants first, then each tenant; the current
    placement's figure beside the plan's, the change (plan minus current, raw units) and the
    twin's measured error for that figure. Empty before a simulation finished."""
    if not done(simulation):
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for tenant in [ALL, *tenants_of(simulation)]:
        current, plan = _side(simulation, "current", tenant), _side(simulation, "plan", tenant)
        for figure, label in TABLE_LABELS.items():
            rows.append({"tenant": tenant, "figure": label, "current": current.get(figure),
                         "plan": plan.get(figure),
                         "change": _change(current.get(figure), plan.get(figure)),
                         "twin_error": error_size(report, figure)})  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def grouped_bars(simulation: Mapping[str, Any] | None, figure: str = "p99_s",
                 report: Mapping[str, Any] | None = None) -> go.Figure:  # fmt: skip
    """Bars of ``figure`` per tenant (all tenants first), current beside plan; the title names
    the twin's measured error for that figure."""
    tenants = [ALL, *tenants_of(simulation)] if done(simulation) else []
    scale = 1000.0 if figure.endswith("_s") else 100.0 if figure == "slo_attainment" else 1.0
    fig = go.Figure()
    for side, colour in zip(SIDES, ("#9aa5b1", "#2f6fde"), strict=True):
        values = [_side(simulation or {}, side, t).get(figure) for t in tenants]
        fig.add_bar(name=side, x=tenants, marker_color=colour,
                    y=[None if v is None else float(v) * scale for v in values])  # fmt: skip
    unit = {1000.0: " (ms)", 100.0: " (%)"}.get(scale, "")
    fig.update_layout(barmode="group", height=300, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      title=f"{FIGURES.get(figure, figure)}{unit}: current vs plan, per tenant "
                            f"(twin error: {error_size(report, figure)})",
                      legend={"orientation": "h", "y": -0.2})  # fmt: skip
    return fig


def observation_rows(observation: Mapping[str, Any] | None,
                     report: Mapping[str, Any] | None) -> pd.DataFrame:  # fmt: skip
    """The observer's figures after a rollout: p50 and p99 predicted (with the twin's error)
    beside observed; empty until it observed."""
    columns = ["figure", "predicted", "observed", "twin_error"]
    if not observation or observation.get("state") != "observed":
        return pd.DataFrame(columns=columns)
    predicted = observation.get("predicted") or {}
    seen = observation.get("observed") or {}
    return pd.DataFrame([{"figure": FIGURES[f], "predicted": value_text(f, predicted.get(f)),
                          "observed": value_text(f, seen.get(f)),
                          "twin_error": error_size(report, f)}
                         for f in ("p50_s", "p99_s")], columns=columns)  # fmt: skip
