"""The fair-share history as the page shows it (pure: no Streamlit, no HTTP).

Input: the ``samples`` of ``GET /admin/fair-share/history`` (oldest first, each
``{"at": epoch s, "tenants": [{tenant, received, entitled, queued_steps, borrowed_runs,
preempted_total, ...}]}``). Output: a long frame, the two time-series figures, and the latest
standing per tenant (who is borrowing, who was preempted in the window).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from app.charts import _empty

COLUMNS = ["seconds", "tenant", "received", "entitled", "queued_steps", "waiting_runs",
           "in_flight_runs", "borrowed_runs", "preempted_total"]  # fmt: skip
PALETTE = ["#457b9d", "#e76f51", "#2a9d8f", "#e9c46a", "#6d597a", "#264653", "#f4a261"]


def history_frame(samples: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (sample, tenant); ``seconds`` is relative to the latest sample (<= 0)."""
    if not samples:
        return pd.DataFrame(columns=COLUMNS)
    latest = float(samples[-1]["at"])
    rows = [{"seconds": round(float(s["at"]) - latest, 2), **{c: t.get(c, 0) for c in COLUMNS[1:]}}
            for s in samples for t in s["tenants"]]  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def share_lines(frame: pd.DataFrame) -> go.Figure:
    """Per tenant over time: share received (solid) and entitled (dotted, same colour)."""
    if frame.empty:
        return _empty("Share over time", "no samples yet")
    fig = go.Figure()
    for i, (tenant, own) in enumerate(frame.groupby("tenant", sort=True)):
        colour = PALETTE[i % len(PALETTE)]
        fig.add_scatter(x=own["seconds"], y=own["received"], mode="lines", name=f"{tenant} received",
                        line={"color": colour, "width": 2}, legendgroup=tenant)  # fmt: skip
        fig.add_scatter(x=own["seconds"], y=own["entitled"], mode="lines", name=f"{tenant} entitled",
                        line={"color": colour, "dash": "dot"}, legendgroup=tenant)  # fmt: skip
    fig.update_layout(title="Share of service per second: received vs entitled",
                      xaxis_title="seconds (0 = latest sample)", yaxis_tickformat=".0%",
                      yaxis_range=[0, 1.05], height=340)  # fmt: skip
    return fig


def queue_lines(frame: pd.DataFrame) -> go.Figure:
    """Waiting steps per tenant over time."""
    if frame.empty:
        return _empty("Queue depth", "no samples yet")
    fig = go.Figure()
    for i, (tenant, own) in enumerate(frame.groupby("tenant", sort=True)):
        fig.add_scatter(x=own["seconds"], y=own["queued_steps"], mode="lines", name=tenant,
                        line={"color": PALETTE[i % len(PALETTE)]})  # fmt: skip
    fig.update_layout(title="Waiting steps per tenant", xaxis_title="seconds (0 = latest sample)",
                      yaxis_rangemode="tozero", height=340)  # fmt: skip
    return fig


def standing(frame: pd.DataFrame) -> pd.DataFrame:
    """Per tenant at the latest sample: shares, queue, borrowing, and steps preempted within
    the window shown (the counter's rise from the window's first sample)."""
    cols = ["tenant", "received", "entitled", "queued_steps", "in_flight_runs", "borrowed_runs",
            "preempted_in_window", "borrowing"]  # fmt: skip
    if frame.empty:
        return pd.DataFrame(columns=cols)
    by = frame.groupby("tenant", sort=True)
    latest = by.last().reset_index()
    latest["preempted_in_window"] = (
        by["preempted_total"].max() - by["preempted_total"].min()
    ).values
    latest["borrowing"] = latest["borrowed_runs"] > 0
    return latest[cols]
