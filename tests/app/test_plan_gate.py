"""The gate's report table (app/plan_gate.py): one row per side of a finished simulation."""

from __future__ import annotations

from app.plan_gate import FIGURES, report_rows


def test_a_finished_simulation_gives_current_beside_plan() -> None:
    sim = {"state": "done", "current": {"p50_s": 0.1, "p99_s": 2.0, "requests": 40},
           "plan": {"p50_s": 0.1, "p99_s": 0.5, "requests": 40}}  # fmt: skip
    rows = report_rows(sim)
    assert list(rows["placement"]) == ["current", "plan"]
    assert list(rows["p99_s"]) == [2.0, 0.5]
    assert rows["throughput_rps"].isna().all()  # a figure the report lacks stays empty


def test_no_rows_before_a_simulation_finished() -> None:
    for sim in (None, {}, {"state": "running"}, {"state": "failed", "error": "x"}):
        rows = report_rows(sim)
        assert rows.empty and list(rows.columns) == ["placement", *FIGURES]
