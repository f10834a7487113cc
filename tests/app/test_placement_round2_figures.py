"""The pure parts of Models and placement, round 2: the plan's report beside the current
placement per tenant (app/plan_figures.py), each prediction with the twin's measured error, the
observer's rows, the canary's PUT body and variant rows, the autoscaling PATCH values."""

from __future__ import annotations

import pandas as pd

from app import autoscale_editor, canary_panel, plan_figures

REPORT = {"trace": "azure_code", "created_at": "2026-12-01T10:00:00", "p50_error": 0.05,
          "p99_error": -0.062, "slo_attainment_error_pp": -1.25}  # fmt: skip
SIM = {"state": "done", "current": {"p50_s": 0.2, "p99_s": 1.5, "tenants": {"b": {"p99_s": 2.0}}},
       "plan": {"p50_s": 0.1, "p99_s": 0.312, "tenants": {"a": {"p99_s": 0.4}}}}  # fmt: skip


def test_each_prediction_carries_the_twins_error_or_says_there_is_none() -> None:
    assert plan_figures.with_error("p99_s", 0.312, REPORT) == (
        "p99 latency 312 ms ±6% (twin error measured on azure_code, 2026-12-01 10:00)"
    )
    assert plan_figures.bounded("slo_attainment", 0.97, REPORT) == "SLO attainment 97.0% ±1.2 pp"
    assert plan_figures.error_size(REPORT, "throughput_rps") == "not measured"
    assert plan_figures.with_error("p99_s", 0.312, None, "no fidelity report yet") == (
        "p99 latency 312 ms (no fidelity report yet; the twin's error is unknown)"
    )


def test_report_beside_lists_all_tenants_then_each_with_both_sides() -> None:
    frame = plan_figures.beside_frame(SIM, REPORT)
    assert list(dict.fromkeys(frame["tenant"])) == ["all tenants", "a", "b"]
    p99 = frame[frame["figure"] == "p99 latency (s)"].set_index("tenant")
    assert p99.loc["all tenants", "change"] == 0.312 - 1.5
    assert pd.isna(p99.loc["a", "current"]) and p99.loc["a", "plan"] == 0.4  # one side only
    assert set(p99["twin_error"]) == {"±6%"}
    bars = plan_figures.grouped_bars(SIM, "p99_s", REPORT)
    assert bars.layout.title.text.endswith("(twin error: ±6%)")
    assert [t.name for t in bars.data] == ["current", "plan"]
    assert list(bars.data[1].y) == [312.0, 400.0, None]


def test_nothing_before_a_simulation_finished() -> None:
    for sim in (None, {}, {"state": "running"}, {"state": "failed", "error": "x"}):
        assert plan_figures.beside_frame(sim, REPORT).empty
        assert plan_figures.tenants_of(sim) == []
    assert plan_figures.observation_rows({"state": "observing"}, REPORT).empty


def test_observation_rows_put_predicted_beside_observed() -> None:
    seen = {"state": "observed", "observed": {"p50_s": 0.3, "p99_s": None},
            "predicted": {"p50_s": 0.1, "p99_s": 0.6}}  # fmt: skip
    rows = plan_figures.observation_rows(seen, None)
    assert rows.to_dict("records") == [
        {"figure": "p50 latency", "predicted": "100 ms", "observed": "300 ms",
         "twin_error": "not validated"},
        {"figure": "p99 latency", "predicted": "600 ms", "observed": "-",
         "twin_error": "not validated"}]  # fmt: skip


def test_canary_body_and_variants() -> None:
    assert canary_panel.body("2", 12.5, canary_panel.OTHER) == {"version": "2", "fraction": 0.125}
    assert canary_panel.body("2", 0, "1") == {"version": "2", "fraction": 0.0,
                                              "baseline_version": "1"}  # fmt: skip
    state = {"baseline": {"model_key": "m:1", "requests": 9, "errors": 0, "error_rate": 0.0,
                          "p99_s": 0.2}, "canary": None}  # fmt: skip
    assert canary_panel.variants(state).to_dict("records") == [
        {"variant": "baseline", "model_key": "m:1", "requests": 9, "errors": 0,
         "error_rate": 0.0, "p99_s": 0.2}]  # fmt: skip


def test_autoscaling_off_and_zero_times_are_sent_as_null() -> None:
    assert autoscale_editor.wanted(False, 0, 4, 0, 0) == {
        "min_replicas": 0,
        "max_replicas": None,
        "scale_out_delay_ms": None,
        "idle_ms": None,
    }
    assert autoscale_editor.wanted(True, 1, 4, 250, 9000)["max_replicas"] == 4
