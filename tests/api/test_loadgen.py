"""The load generator's planning and summary (pure parts) and its command line."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from control.commands import api as api_command
from control.services import loadgen as lg


@pytest.mark.parametrize("trace", ["azure", "mooncake", "servegen"])
def test_arrivals_are_time_scaled_and_shared_by_tenants(trace):
    base = lg.LoadConfig(trace=trace, max_requests=40, span_s=600)
    fast = lg.LoadConfig(trace=trace, max_requests=40, span_s=600, rate_factor=4.0)
    slow_arrivals = lg.arrivals(base, ["a", "b"])
    fast_arrivals = lg.arrivals(fast, ["a", "b"])
    assert 0 < len(slow_arrivals) <= 40
    assert {r.tenant for r in slow_arrivals} <= {"a", "b"}
    assert all(
        x.arrival_s <= y.arrival_s for x, y in zip(slow_arrivals, slow_arrivals[1:], strict=False)
    )
    if trace != "servegen":  # servegen draws its own arrivals per window
        span = slow_arrivals[-1].arrival_s
        assert fast_arrivals[-1].arrival_s == pytest.approx(span / 4)


def test_weights_split_tenants_in_proportion():
    config = lg.LoadConfig(trace="azure", max_requests=40)
    tenants = [r.tenant for r in lg.arrivals(config, ["a", "b"], [3, 1])]
    assert tenants.count("a") == 3 * tenants.count("b")


@pytest.mark.parametrize(
    "route,path,field",
    [
        ("chat", "/v1/chat/completions", "messages"),
        ("completions", "/v1/completions", "prompt"),
        ("embeddings", "/v1/embeddings", "input"),
        ("workflow", "/v1/workflows/rag/versions/1/runs", "inputs"),
    ],
)
def test_plan_sizes_calls_from_the_trace(route, path, field):
    config = lg.LoadConfig(trace="azure", route=route, max_requests=10, max_prompt_words=12,
                           max_output_tokens=5)  # fmt: skip
    calls = lg.plan_calls(config, lg.arrivals(config, ["a"]))
    assert len(calls) == 10 and all(c.path == path and field in c.body for c in calls)
    if route in ("chat", "completions"):
        assert all(1 <= c.body["max_tokens"] <= 5 for c in calls)
    texts = [c.body.get("prompt") or c.body.get("input") or "" for c in calls]
    assert all(len(t.split()) <= 12 for t in texts)


def test_summary_counts_rejections_errors_and_percentiles():
    outcomes = [lg.Outcome("a", 200, 0.010 * i) for i in range(1, 101)]
    outcomes += [lg.Outcome("b", 429, 0.001), lg.Outcome("b", 0, 1.0), lg.Outcome("b", 200, 0.5)]
    rows = {r.tenant: r for r in lg.summarise(outcomes, wall_s=10.0)}
    assert rows["a"].ok == 100 and rows["a"].p50_ms == pytest.approx(500)
    assert rows["a"].p99_ms == pytest.approx(990)
    assert (rows["b"].rejected, rows["b"].errors, rows["b"].ok) == (1, 1, 1)
    assert rows["all"].sent == 103 and rows["all"].throughput_rps == pytest.approx(10.1)


def test_config_names_a_bad_value():
    with pytest.raises(ValueError, match="trace='nope'"):
        lg.LoadConfig(trace="nope")


def test_commands_register_and_describe_themselves():
    app = typer.Typer()
    api_command.register(app)
    runner = CliRunner()
    out = runner.invoke(app, ["loadgen", "--help"])
    assert out.exit_code == 0 and "--trace" in out.output and "--rate" in out.output
    assert runner.invoke(app, ["api", "--help"]).exit_code == 0


async def test_gateway_as_the_api_command_builds_it(tmp_path, monkeypatch, _sqlite_template):
    import shutil

    import httpx

    from control.config import get_settings
    from control.wiring.gateway import build_gateway

    shutil.copyfile(_sqlite_template, tmp_path / "legato.db")
    monkeypatch.setenv("LEGATO_DATABASE_URL", f"sqlite:///{tmp_path / 'legato.db'}")
    monkeypatch.setenv("LEGATO_ADMIN_TOKEN", "cli-admin")
    get_settings.cache_clear()
    try:
        app = build_gateway(with_runtime=False)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            headers = {"Authorization": "Bearer cli-admin"}
            r = await client.post("/admin/cohorts", json={"name": "c"}, headers=headers)
            assert r.status_code == 201
            audit = (await client.get("/admin/audit", headers=headers)).json()
            assert audit["items"][0]["actor"] == "admin"
    finally:
        get_settings.cache_clear()
