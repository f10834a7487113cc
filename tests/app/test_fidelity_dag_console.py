"""The console names what the last validation ran: workflow, trace and load (What-if's "How
far to trust the twin", with a whole-DAG report's per-stage table; the plan figures' note on
Models and placement), all from ``GET /admin/fidelity/latest``."""

from __future__ import annotations

import streamlit as st

from app import plan_figures
from control.services.fidelity_reports import FidelityReportService
from db.session import make_engine, make_session_factory
from tests.app.conftest import open_page, signed_in


def _stage(live: float, twin: float) -> dict:
    return {"live": {"p50_s": live, "p99_s": 2 * live}, "twin": {"p50_s": twin, "p99_s": 2 * twin},
            "p50_error": abs(twin - live) / live, "p99_error": abs(twin - live) / live}  # fmt: skip


RESULT = {
    "p50_error": 0.04, "p99_error": 0.12, "slo_attainment_error_pp": -1.0,
    "live": {"p50_s": 0.5, "p99_s": 0.9}, "twin": {"p50_s": 0.52, "p99_s": 1.008},
    "per_load": [{"load": 0.9, "p50_error": 0.04, "p99_error": 0.12,
                  "live": {"p50_s": 0.5, "p99_s": 0.9}, "twin": {"p50_s": 0.52, "p99_s": 1.008},
                  "stages": {"embed": _stage(0.02, 0.021), "search": _stage(0.002, 0.002),
                             "rerank": _stage(0.05, 0.04), "answer": _stage(0.4, 0.43)}}],
}  # fmt: skip


def test_whatif_names_workflow_trace_and_load_and_shows_each_stage(api_db_url, console) -> None:
    factory = make_session_factory(make_engine(api_db_url))
    FidelityReportService(factory).store(
        "test", "my_trace.jsonl", {"workflow": "rag", "loads": [0.9], "load": 0.9}, RESULT
    )
    st.cache_data.clear()
    open_page(signed_in(console), "whatif.py")
    notes = [c.value for c in console.caption]
    assert any("workflow rag on trace my_trace.jsonl at load 0.9" in n for n in notes), notes
    table = next(d.value for d in console.dataframe if "stage" in d.value.columns)
    assert list(table["stage"]) == ["embed", "search", "rerank", "answer", "end to end"]
    answer = table[table["stage"] == "answer"].iloc[0]
    assert (answer["live p50 ms"], answer["twin p50 ms"]) == (400.0, 430.0)


def test_plan_figures_say_which_workflow_and_load_the_error_was_measured_at() -> None:
    report = {"trace": "azure_code", "workflow": "agent", "load": 0.7,
              "created_at": "2026-12-07T10:00:00"}  # fmt: skip
    assert plan_figures.error_source(report) == (
        "twin error measured on azure_code (agent workflow, load 0.7), 2026-12-07 10:00"
    )
