"""The last validation's figures per stage of its workflow, for "How far to trust the twin".

A whole-DAG validation (``legato sim validate --workflow rag|agent --store``) keeps, per load,
each stage's and the end-to-end p50/p99 of the live stack and the twin; the report comes from
``GET /admin/fidelity/latest`` (its ``config.result_extra.per_load``). An embed-only report
has no stages: nothing is shown for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

COLUMNS = ["load", "stage", "live p50 ms", "twin p50 ms", "p50 error", "live p99 ms",
           "twin p99 ms", "p99 error"]  # fmt: skip


def _row(load: Any, stage: str, fig: Mapping[str, Any]) -> list[Any]:
    live, twin = fig.get("live", {}), fig.get("twin", {})
    return [load, stage,
            round(live.get("p50_s", 0) * 1000, 1), round(twin.get("p50_s", 0) * 1000, 1),
            fig.get("p50_error"),
            round(live.get("p99_s", 0) * 1000, 1), round(twin.get("p99_s", 0) * 1000, 1),
            fig.get("p99_error")]  # fmt: skip


def stage_frame(report: Mapping[str, Any] | None) -> pd.DataFrame | None:
    """One row per (load, stage) and one "end to end" row per load; None without stages."""
    extra = ((report or {}).get("config") or {}).get("result_extra") or {}
    per_load = extra.get("per_load") or []
    rows = []
    for row in per_load:
        load = row.get("load")
        rows += [_row(load, stage, fig) for stage, fig in (row.get("stages") or {}).items()]
        rows.append(_row(load, "end to end", {"live": row.get("live", {}),
                                              "twin": row.get("twin", {}),
                                              "p50_error": row.get("p50_error"),
                                              "p99_error": row.get("p99_error")}))  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS) if rows else None


def show(report: Mapping[str, Any] | None) -> None:
    """The per-stage table of ``report``, titled with its workflow, trace and loads."""
    frame = stage_frame(report)
    if frame is None or report is None:
        return
    st.caption(f"Per stage: workflow {report.get('workflow', '?')} on trace "
               f"{report.get('trace', '?')}, loads "
               f"{', '.join(f'{x:g}' for x in sorted(set(frame['load'])))} "
               "(fractions of the measured capacity)")  # fmt: skip
    pct = st.column_config.NumberColumn(format="percent")
    st.dataframe(frame, hide_index=True, key="fid_stages",
                 column_config={"p50 error": pct, "p99 error": pct})  # fmt: skip
