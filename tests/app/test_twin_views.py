"""Pure parts of the twin and rollout views: delta tables with the twin's error beside each
figure, the fidelity sentence, preview request bodies and rollout progress."""

from __future__ import annotations

import pytest

from app import rollout_panel, twin

REPORT = {"id": 3, "created_at": "2026-11-28T10:15:00Z", "trace": "azure_code",
          "p50_error": 0.08, "p99_error": 0.214, "slo_attainment_error_pp": -1.5}  # fmt: skip


def _delta(metric: str, better: bool | None = None) -> dict:
    return {"metric": metric, "baseline": 2.0, "variant": 1.5, "delta": -0.5, "ci95": 0.1,
            "better": better}  # fmt: skip


@pytest.mark.parametrize(
    ("metric", "report", "expected"),
    [
        ("all.e2e_p99_s", REPORT, "±21%"),
        ("all.e2e_p50_s", REPORT, "±8%"),
        ("all.slo_attainment", REPORT, "±1.5 pp"),
        ("all.throughput_rps", REPORT, "not measured"),
        ("all.e2e_p99_s", None, "not validated yet"),
    ],
)
def test_each_figure_carries_the_twin_error_that_bounds_it(metric, report, expected):
    frame = twin.delta_frame([{"variant": "v", "deltas": [_delta(metric)]}], report)
    assert list(frame["twin_error"]) == [expected]
    assert list(frame["figure"]) == [twin.FIGURES[metric]]


def test_delta_rows_follow_the_figure_order_and_name_the_verdict():
    deltas = [_delta("fleet.headroom_in_use"), _delta("all.e2e_p99_s", True),
              _delta("all.slo_attainment", False), _delta("not.a.headline")]  # fmt: skip
    frame = twin.delta_frame([{"variant": "a", "deltas": deltas}, {"variant": "b"}], REPORT)
    assert list(frame["figure"]) == ["p99 latency (s)", "SLO attainment", "headroom in use"]
    assert list(frame["verdict"]) == ["better", "worse", "no clear change"]
    assert set(frame["variant_name"]) == {"a"}
    assert twin.delta_frame([], None).columns.tolist() == twin.DELTA_COLUMNS


def test_fidelity_sentence_or_not_validated():
    text = twin.twin_error_sentence(REPORT)
    assert text.startswith(
        "Twin error (last validation 2026-11-28 10:15: workflow embed on trace azure_code"
    )
    assert "p50 ±8%" in text and "p99 ±21%" in text and "SLO ±1.5 pp" in text
    none = twin.twin_error_sentence(None, "no fidelity report yet: run legato sim validate")
    assert none.startswith("Twin not validated yet (no fidelity report yet")


@pytest.mark.parametrize(
    ("scope", "expected"),
    [("accelerator", {"accelerator": "L4"}), ("devices", {"device_ids": [4, 5]}),
     ("all", {"labels": {}})],
)  # fmt: skip
def test_headroom_body_is_what_the_api_stores(scope, expected):
    body = twin.headroom_body("r", scope, "L4", [4, 5], 12.5, ["critical"], False)
    assert body == {"name": "r", "selector": expected, "reserved_milli": 125,
                    "allowed_classes": ["critical"], "borrowable": False}  # fmt: skip


def test_preview_request_compares_the_state_in_force_with_one_variant():
    body = twin.preview_request("edit", {"plan_id": 4}, "azure_code", 2, 80)
    assert body["submit"] is True
    scenario = body["scenario"]
    assert scenario["baseline"] == "active" and scenario["seeds"] == [0, 1]
    assert scenario["variants"] == {"edit": {"plan_id": 4}}
    assert scenario["workload"] == {"max_requests": 80, "trace_name": "azure_code"}
    assert "trace_name" not in twin.preview_request("e", {}, None, 1, 10)["scenario"]["workload"]


def _progress(state: str | None, **kw) -> dict:
    return {"plan_id": 7, "plan_status": "draft", "phase": "rollout" if state else None,
            "state": state, "in_progress": state in ("loading", "draining"), "live": True,
            "steps_done": 0, "steps_total": None, "current_step": "", "loads_pending": [],
            "draining": [], "blocked": [], "loaded": 0, "evicted": 0, "moved": 0, "errors": [],
            "transitions": [], **kw}  # fmt: skip


@pytest.mark.parametrize(
    ("progress", "fraction", "words"),
    [
        (_progress(None), 0.0, ["Plan #7 has not been rolled out"]),
        (_progress("loading", steps_done=1, steps_total=4, current_step="loading 3 replica(s)"),
         0.25, ["Rollout of plan #7: loading, step 1 of 4 - loading 3 replica(s)"]),
        (_progress("draining", steps_done=3, steps_total=4), 0.75, ["draining, step 3 of 4"]),
        (_progress("completed", steps_done=4, steps_total=4, current_step="done"), 1.0,
         ["completed, step 4 of 4"]),
        (_progress("aborted", steps_done=1, steps_total=None), 0.0, ["aborted"]),
        (_progress("loading", phase="rollback", blocked=["m@gpu0"]), 0.0,
         ["Rollback of plan #7: loading", "waiting for memory: m@gpu0"]),
    ],
)  # fmt: skip
def test_rollout_progress_counts_steps_done_of_steps_needed(progress, fraction, words):
    got, text = rollout_panel.progress_of(progress)
    assert got == pytest.approx(fraction)
    assert all(w in text for w in words), text
    assert progress["state"] == "completed" or "done" not in text


@pytest.mark.parametrize(
    ("progress", "allowed"),
    [(None, False), (_progress(None), False), (_progress("loading"), False),
     (_progress("completed"), True), (_progress("completed", phase="rollback"), False),
     (_progress("aborted"), False)],
)  # fmt: skip
def test_rollback_is_offered_only_after_a_completed_rollout(progress, allowed):
    assert rollout_panel.can_roll_back(progress) is allowed
