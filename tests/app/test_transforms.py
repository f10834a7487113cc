"""The pure parts of the console: spec tables, plan diffs, fair-share shares, alerts, charts."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app import charts, transforms
from app.client import ApiError, Problem
from app.settings import read_settings

SPEC = {
    "inputs": {"query": "text"},
    "outputs": {"answer": "answer.text"},
    "nodes": [
        {"id": "embed", "task": "embed", "model": "e:1", "retries": 1},
        {"id": "search", "tool": "vector_search", "params": {"index": "docs", "top_k": 5}},
        {"id": "answer", "task": "generate", "model": "g:1", "timeout_s": 60},
    ],
    "edges": [
        {"from": "input.query", "to": "embed.text"},
        {"from": "embed.embedding", "to": "search.embedding"},
        {"from": "search.documents", "to": "answer.context", "when": "found"},
    ],
}


def test_spec_round_trips_through_the_editable_tables() -> None:
    back = transforms.spec_from_frames(
        SPEC, transforms.nodes_frame(SPEC), transforms.edges_frame(SPEC)
    )
    assert back == SPEC


def test_edited_cells_become_typed_spec_fields_and_blank_rows_drop() -> None:
    nodes = transforms.nodes_frame(SPEC)
    nodes.loc[2, "retries"] = 2.0
    nodes.loc[len(nodes)] = [None] * len(nodes.columns)
    spec = transforms.spec_from_frames(SPEC, nodes, transforms.edges_frame(SPEC))
    assert spec["nodes"][2]["retries"] == 2 and isinstance(spec["nodes"][2]["retries"], int)
    assert len(spec["nodes"]) == 3


def test_bad_params_json_names_the_row() -> None:
    nodes = transforms.nodes_frame(SPEC)
    nodes.loc[1, "params"] = "{not json"
    with pytest.raises(transforms.SpecTableError, match="row 2 params"):
        transforms.spec_from_frames(SPEC, nodes, transforms.edges_frame(SPEC))


@pytest.mark.parametrize(("location", "message", "owner"), [
    ("nodes[answer]", "unknown model 'x:1'", "answer"),
    ("edges[2]", "edge from 'search' to nothing", "search"),
    ("outputs", "output refers to missing node", "spec"),
    ("answer", "timeout must be > 0", "answer"),
])  # fmt: skip
def test_problems_are_grouped_by_the_node_they_name(
    location: str, message: str, owner: str
) -> None:
    grouped = transforms.problems_by_node([{"location": location, "message": message}],
                                          ["embed", "search", "answer"])  # fmt: skip
    assert list(grouped) == [owner]


@pytest.mark.parametrize(
    ("versions", "expected"),
    [(["1"], "2"), (["1", "7", "3"], "8"), (["beta"], "beta.1"), ([], "1")],
)
def test_next_version(versions: list[str], expected: str) -> None:
    assert transforms.next_version(versions) == expected


def _p(model: int, devices: list[int], replicas: int = 1, pool: str = "hot") -> dict:
    return {"model_id": model, "device_ids": devices, "replicas": replicas, "pool": pool}


def test_plan_diff_lists_adds_removes_and_changes_only() -> None:
    active = [_p(1, [1]), _p(2, [2]), _p(3, [3, 4])]
    draft = [_p(1, [1]), _p(2, [2], replicas=2), _p(4, [5])]
    diff = transforms.plan_diff(active, draft)
    assert sorted(zip(diff["change"], diff["model_id"], strict=True)) == [
        ("add", 4),
        ("change", 2),
        ("remove", 3),
    ]


@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 10_000)), min_size=1, max_size=8))
def test_shares_sum_to_one_and_follow_weights(pairs: list[tuple[int, int]]) -> None:
    tenants = [{"tenant_id": f"t{i}", "weight": w, "priority_class": "standard", "counter_milli": c,
                "queued_steps": 0, "waiting_runs": 0, "in_flight_runs": 0, "borrowed_runs": 0}
               for i, (w, c) in enumerate(pairs)]  # fmt: skip
    frame = transforms.tenant_standing({"tenancy": {"tenants": tenants}})
    assert frame["share_entitled"].sum() == pytest.approx(1.0)
    served = sum(w * c for w, c in pairs)
    assert frame["share_received"].sum() == pytest.approx(1.0 if served else 0.0)
    heaviest = max(range(len(pairs)), key=lambda i: pairs[i][0])
    assert frame["share_entitled"][heaviest] == frame["share_entitled"].max()


def test_service_rate_is_counter_growth_per_second() -> None:
    history = [{"now": 10.0, "counters": {"a": 0, "b": 5000}},
               {"now": 12.0, "counters": {"a": 4000, "b": 5000}}]  # fmt: skip
    assert transforms.service_rates(history) == {"a": 2.0, "b": 0.0}
    assert transforms.service_rates(history[:1]) == {}


def test_alerts_name_down_devices_exhausted_quotas_and_headroom_in_use() -> None:
    snapshot = {"devices": [{"device_id": "cpu:1", "up": False}],
                "tenancy": {"tenants": [{"tenant_id": "acme", "quota": [
                    {"resource": "concurrent_requests", "nominal": 2, "used": 3, "borrowed": 1,
                     "borrowing_limit": 1, "lending_limit": 0}]}],
                    "headroom": [{"reservation_id": "burst", "used_slots": 1, "reserved_slots": 2}]}}  # fmt: skip
    found = transforms.alerts([{"name": "gpu-a-0", "status": "down"},
                               {"name": "gpu-a-1", "status": "up"}], snapshot)  # fmt: skip
    text = " | ".join(t for _, t in found)
    assert "gpu-a-0 is down" in text and "cpu:1 is down" in text and "gpu-a-1" not in text
    assert "acme exhausted its concurrent_requests quota (3/3)" in text
    assert "headroom burst in use: 1/2" in text
    assert transforms.alerts([{"name": "x", "status": "up"}], None) == []


def test_workflow_stats_latency_and_slo() -> None:
    base = {"workflow_name": "rag", "workflow_version": "1", "received_at": "2026-01-01T00:00:00"}
    reqs = [
        {**base, "status": "succeeded", "finished_at": f"2026-01-01T00:00:0{s}"} for s in (1, 2, 9)
    ]
    reqs.append({**base, "status": "rejected", "finished_at": None})
    stats = transforms.workflow_stats(reqs, slo_s=5.0).iloc[0]
    assert (stats["runs"], stats["succeeded"], stats["rejected"]) == (4, 3, 1)
    assert stats["p50_s"] == 2.0 and stats["slo_attainment"] == pytest.approx(2 / 3)


def test_headroom_preview_covers_matching_devices_only() -> None:
    devices = [{"id": 1, "name": "a", "accelerator": "H100", "memory_mib": 1000, "labels": {"z": 1}},
               {"id": 2, "name": "b", "accelerator": "L4", "memory_mib": 2000, "labels": {}}]  # fmt: skip
    assert list(
        transforms.headroom_preview(devices, {"accelerator": "H100"}, 150)["reserved_mib"]
    ) == [150]
    assert len(transforms.headroom_preview(devices, {"labels": {}}, 100)) == 2
    assert list(transforms.headroom_preview(devices, {"device_ids": [2]}, 500)["usable_mib"]) == [
        1000
    ]


def test_waiting_reasons_filter_by_tenant_oldest_first() -> None:
    step = {"node_id": "n", "replica_id": "r", "why": "queued: behind its share"}
    snap = {"queues": {"r": [{**step, "request_id": "q2", "tenant_id": "b", "queued_since": 2.0},
                             {**step, "request_id": "q1", "tenant_id": "a", "queued_since": 1.0}]},
            "unplaced": [{**step, "request_id": "q0", "tenant_id": "a", "queued_since": 0.5}]}  # fmt: skip
    assert list(transforms.waiting_reasons(snap)["request_id"]) == ["q0", "q1", "q2"]
    assert list(transforms.waiting_reasons(snap, "b")["request_id"]) == ["q2"]
    pending = {"m:1": [{**step, "replica_id": None, "request_id": "q3", "tenant_id": "b",
                        "queued_since": 0.1, "why": "waiting for a free replica of m:1"}]}  # fmt: skip
    reasons = transforms.waiting_reasons({**snap, "pending": pending}, "b")
    assert list(reasons["request_id"]) == ["q3", "q2"]
    assert list(reasons["waits_in"]) == ["pending", "queue"]
    assert reasons["why"][0] == "waiting for a free replica of m:1"


WAIT_CASES = [
    ("empty", {}, []),
    ("queues only", {"queues": {"r": ["a", "a", "b"]}}, [("a", 2, 0, 0), ("b", 1, 0, 0)]),
    ("pending counts", {"pending": {"m": ["a", "c"], "n": ["c"]}}, [("a", 0, 1, 0), ("c", 0, 2, 0)]),
    ("all three", {"queues": {"r": ["a"]}, "pending": {"m": ["a"]}, "unplaced": ["a"]},
     [("a", 1, 1, 1)]),
]  # fmt: skip


def _views(raw: object) -> object:
    """Tenant names -> step views (only tenant_id matters to the counts)."""
    if isinstance(raw, dict):
        return {k: _views(v) for k, v in raw.items()}
    return [{"tenant_id": t} for t in raw]  # type: ignore[union-attr]


@pytest.mark.parametrize(("name", "snap", "expected"), WAIT_CASES, ids=[c[0] for c in WAIT_CASES])
def test_waiting_counts_include_pending_work(name: str, snap: dict, expected: list) -> None:
    frame = transforms.waiting_counts({k: _views(v) for k, v in snap.items()})
    rows = [(r.tenant, r.queue, r.pending, r.unplaced) for r in frame.itertuples()]
    assert rows == expected
    assert list(frame["total"]) == [q + p + u for _, q, p, u in expected]


def test_charts_are_figures_even_when_empty() -> None:
    empty = [charts.placement_map([], {}, {}), charts.dag_figure({}), charts.memory_heatmap([]),
             charts.share_bars(pd.DataFrame(columns=["tenant"])), charts.queue_depth_lines([]),
             charts.quota_bars([]), charts.whatif_bars([], "v"), charts.inventory_sunburst([], {})]  # fmt: skip
    assert all(isinstance(f, go.Figure) and f.layout.annotations for f in empty)


def test_placement_map_counts_replicas_per_device_and_model() -> None:
    fig = charts.placement_map([_p(1, [1, 2], replicas=2), _p(2, [1])], {1: "d1", 2: "d2"},
                               {1: "llm", 2: "embed"})  # fmt: skip
    heat = fig.data[0]
    assert list(heat.x) == ["d1", "d2"] and list(heat.y) == ["embed", "llm"]
    assert [list(r) for r in heat.z] == [[1, 0], [2, 2]]


def test_dag_figure_marks_problem_nodes_red_and_points_edges_forward() -> None:
    fig = charts.dag_figure(SPEC, {"search": ["unknown index"]})
    nodes = fig.data[0]
    colors = dict(zip(nodes.text, nodes.marker.color, strict=True))
    assert colors["search"] == charts.BAD and colors["embed"] != charts.BAD
    xs = dict(zip(nodes.text, nodes.x, strict=True))
    assert xs["input"] < xs["embed"] < xs["search"] < xs["answer"] < xs["output"]
    assert any(a.text == "when found" for a in fig.layout.annotations)


def test_whatif_bars_colour_by_verdict() -> None:
    deltas = [
        {"metric": "p99", "baseline": 2.0, "variant": 1.0, "delta": -1.0, "ci95": 0.1,
         "better": True},
        {"metric": "jain", "baseline": 0.8, "variant": 0.6, "delta": -0.2, "ci95": 0.02,
         "better": False},
        {"metric": "rejected", "baseline": 0.0, "variant": 0.0, "delta": 0.0, "ci95": 0.0,
         "better": None},
    ]  # fmt: skip
    fig = charts.whatif_bars(deltas, "spread", {"p99": "p99 latency (s)"})
    assert list(fig.data[0].x) == ["p99 latency (s)", "jain"]  # no relative change from 0
    assert list(fig.data[0].y) == [-50.0, -25.0]
    assert list(fig.data[0].marker.color) == [charts.OK, charts.BAD]
    assert list(fig.data[0].error_y.array) == [5.0, 2.5]


def test_api_error_finds_messages_about_a_field() -> None:
    err = ApiError(422, "invalid_request", "1 invalid field(s)", "body.nominal",
                   [Problem("body.nominal", "Input should be >= 0")])  # fmt: skip
    assert err.about("nominal") == ["Input should be >= 0"]
    assert err.about("weight") == []


def test_settings_never_carry_a_credential_and_read_the_sign_in_durations(tmp_path) -> None:
    (tmp_path / "admin_token").write_text("from-file\n")
    env = {
        "LEGATO_VAR_DIR": str(tmp_path),
        "LEGATO_ADMIN_TOKEN": "env",
        "LEGATO_API_URL": "http://x:1/",
        "LEGATO_CONSOLE_SESSION_S": "90",
    }
    got = read_settings(env)
    assert (got.api_url, got.var_dir, got.session_s) == ("http://x:1", tmp_path, 90.0)
    assert "env" not in repr(got) and "from-file" not in repr(got)
    assert read_settings({}).session_s == 8 * 3600 and read_settings({}).link_ttl_s == 3600
    for bad in ("0", "-5", "soon"):
        with pytest.raises(ValueError, match="LEGATO_CONSOLE_SESSION_S"):
            read_settings({"LEGATO_CONSOLE_SESSION_S": bad})


def test_quota_bars_show_use_as_share_and_flag_exhausted() -> None:
    fig = charts.quota_bars([{"tenant": "a", "resource": "r", "used": 5, "nominal": 10},
                             {"tenant": "b", "resource": "r", "used": 12, "nominal": 10}])  # fmt: skip
    assert list(fig.data[0].y) == [0.5, 1.2]
    assert list(fig.data[0].marker.color) == ["#457b9d", charts.BAD]


def test_live_charts_count_seconds_back_from_the_latest_sample() -> None:
    heat = charts.memory_heatmap([{"t": 11700.0, "devices": {"cpu:0": 0.25}},
                                  {"t": 11702.5, "devices": {"cpu:0": 0.5}}])  # fmt: skip
    assert list(heat.data[0].x) == [-2.5, 0.0]
    assert heat.data[0].texttemplate  # few samples: the share is printed in each cell
    lines = charts.queue_depth_lines([{"t": 500.0, "queued": {"acme": 2}},
                                      {"t": 501.0, "queued": {"acme": 0, "globex": 1}}])  # fmt: skip
    assert [list(tr.x) for tr in lines.data] == [[-1.0, 0.0], [-1.0, 0.0]]
    assert [list(tr.y) for tr in lines.data] == [[2, 0], [0, 1]]
