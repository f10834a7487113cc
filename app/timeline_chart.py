"""Pure builders of the request timeline page (data in, figure or frame out; no Streamlit, no
HTTP): the Gantt chart of a run's step spans, its decisions as a table, the slow-run picker's
labels.

A step's bar is drawn in its parts, in the order time passes for it: queue wait, batch wait (the
batcher held its batch), transfer and hand-offs, device time. Instants are ms after the run was
submitted, as the timeline endpoint gives them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

#: (span field, legend name, colour), in the order a step's time passes.
PARTS = (("queue_ms", "queue wait", "#8d99ae"), ("batch_wait_ms", "batch wait", "#f4a261"),
         ("transfer_ms", "transfer and hand-offs", "#e9c46a"),
         ("device_ms", "device time", "#2a9d8f"))  # fmt: skip
DECISION_COLUMNS = ["at_ms", "kind", "node", "choice", "reason", "candidates"]


def step_label(span: Mapping[str, Any]) -> str:
    """One row of the chart: node, map chunk, attempt and where it ran."""
    chunk = f"#{span['chunk']}" if span.get("chunk") is not None else ""
    where = span.get("replica") or span.get("device") or "host"
    return f"{span['node']}{chunk} (attempt {span['attempt']}) on {where}"


def gantt(spans: Sequence[Mapping[str, Any]], total_ms: float) -> go.Figure:
    """Horizontal bars, one row per step attempt, split into its parts; the run's end-to-end
    time is the dashed line."""
    fig = go.Figure()
    if not spans:
        fig.update_layout(title="Steps", height=220, xaxis_visible=False, yaxis_visible=False,
                          annotations=[{"text": "no step spans recorded for this run",
                                        "showarrow": False}])  # fmt: skip
        return fig
    ordered = sorted(spans, key=lambda s: (s["ready_ms"], s["node"], s.get("chunk") or 0))
    labels = [step_label(s) for s in ordered]
    start = [float(s["ready_ms"]) for s in ordered]
    for field, name, colour in PARTS:
        widths = [float(s.get(field) or 0.0) for s in ordered]
        fig.add_trace(go.Bar(
            y=labels, x=widths, base=start, orientation="h", name=name, marker_color=colour,
            hovertemplate=f"{name}: %{{x:.2f}} ms<br>from %{{base:.2f}} ms<extra>%{{y}}</extra>",
        ))  # fmt: skip
        start = [b + w for b, w in zip(start, widths, strict=True)]
    fig.add_vline(x=total_ms, line_dash="dash", line_color="#e63946",
                  annotation_text=f"end to end {total_ms:.1f} ms")  # fmt: skip
    fig.update_layout(
        barmode="overlay", height=200 + 34 * len(ordered), title="Where each step's time went",
        xaxis={"title": "ms after the run was submitted", "rangemode": "tozero"},
        yaxis={"autorange": "reversed"},
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom", "x": 0},
        margin={"l": 10, "r": 10, "t": 80, "b": 10}, title_y=0.97,
    )  # fmt: skip
    return fig


def _candidates(d: Mapping[str, Any]) -> str:
    return " | ".join(
        f"{c['replica']}: {c['total_us']} us (queue {c['queue_us']}, service {c['service_us']}, "
        f"transfer {c['transfer_us']}, load {c['load_us']}, saving {c['saving_us']})"
        for c in d.get("candidates") or []
    )


def decisions_frame(decisions: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The decisions taken for a run, in order: admission, routing (with the candidates'
    predicted completions), steals, retries, preemptions."""
    rows = []
    for d in decisions:
        kind = d.get("kind", "")
        choice = {"admission": d.get("verdict"), "route": d.get("replica") or "host",
                  "steal": f"{d.get('from')} -> {d.get('to')}",
                  "retry": d.get("new_key"), "preempt": d.get("new_key")}.get(kind)  # fmt: skip
        rows.append({"at_ms": d.get("at_ms"), "kind": kind, "node": d.get("node", ""),
                     "choice": str(choice or ""), "reason": d.get("reason", ""),
                     "candidates": _candidates(d)})  # fmt: skip
    return pd.DataFrame(rows, columns=DECISION_COLUMNS)


def slow_label(run: Mapping[str, Any]) -> str:
    """A slow run as the picker lists it."""
    return (f"{run['latency_ms']:.0f} ms  {run['workflow']} v{run['version']}  "
            f"{run['status']}  {run['id']}")  # fmt: skip
