"""The whole-DAG fidelity check (``legato sim validate --workflow rag|agent``): its inputs
(loads, traces in either format, arrivals at a fraction of capacity), its tables from the
calibration spans, and the check end to end on tiny random models through the real executor,
runtime and twin (the figures of the real models are the report's, not asserted here)."""

from __future__ import annotations

import json
import math

import pytest
import typer
from typer.testing import CliRunner

from control.cli import app
from control.commands.sim_dag import loads_of
from control.services.fidelity.dag_live import RunSeen
from control.services.fidelity.dag_tables import calibrate
from control.services.fidelity.dag_world import (
    DagFidelityConfig,
    arrivals,
    query,
    read_trace,
    workflow_spec,
)
from control.services.fidelity_reports import FidelityReportService
from db import migrate
from db.session import make_engine, make_session_factory
from sim.traces.records import SHIPPED

RAG_STAGES = {"embed", "search", "rerank", "answer"}


def test_loads_parse_as_a_list_and_refuse_what_is_not_a_fraction() -> None:
    assert loads_of("0.3,0.7,0.9") == [0.3, 0.7, 0.9] and loads_of("0.9") == [0.9]
    for bad in ("1.2", "0.3,x", "", "0"):
        with pytest.raises(typer.BadParameter):
            loads_of(bad)


def test_a_trace_in_either_format_is_read_and_named(tmp_path) -> None:
    name, reqs = read_trace(DagFidelityConfig(trace="mooncake_conversation", requests=5))
    assert name == "mooncake_conversation" and len(reqs) == 5
    copy = tmp_path / "mine.jsonl"  # a file of our own, format from its suffix
    copy.write_text(SHIPPED["mooncake_conversation"].read_text())
    name, reqs = read_trace(DagFidelityConfig(trace=str(copy), requests=7))
    assert name == "mine.jsonl" and len(reqs) == 7
    as_csv = tmp_path / "mine.txt"  # any name: the format given
    as_csv.write_text(SHIPPED["azure_code"].read_text())
    _, reqs = read_trace(DagFidelityConfig(trace=str(as_csv), trace_format="azure", requests=4))
    assert len(reqs) == 4
    with pytest.raises(ValueError, match="no such"):
        read_trace(DagFidelityConfig(trace=str(tmp_path / "absent.csv")))


def test_arrivals_have_the_asked_mean_rate_and_queries_in_range() -> None:
    cfg = DagFidelityConfig(requests=40)
    _, trace = read_trace(cfg)
    reqs = arrivals(cfg, trace, rate_rps=5.0, tag="a-")
    assert (len(reqs) - 1) / (reqs[-1].at - reqs[0].at) == pytest.approx(5.0)
    assert all(cfg.min_tokens <= a.request.prompt_tokens <= cfg.max_tokens for a in reqs)
    assert reqs[0].request.request_id == "a-q0" and reqs[0].request.workflow == "rag"
    assert query(10).split()[0] == "what" and len(query(10).split()) == 8


def test_generate_steps_are_capped_and_config_is_checked() -> None:
    spec = workflow_spec(DagFidelityConfig(workflow="agent", max_new_tokens=5))
    gens = [n for n in spec["nodes"] if n.get("task") == "generate"]
    assert len(gens) == 2 and all(n["params"]["max_tokens"] == 5 for n in gens)
    with pytest.raises(ValueError, match="workflow"):
        DagFidelityConfig(workflow="chat")
    with pytest.raises(ValueError, match="load"):
        DagFidelityConfig(load=1.0)


def _span(model: str, batch: str, size: int, device: float, took: float) -> dict:
    return {"model": model, "batch_id": batch, "batch_size": size, "device_ms": device,
            "transfer_ms": took - device, "dispatched_ms": 0.0, "end_ms": took,
            "ready_ms": 0.0}  # fmt: skip


def test_calibration_tables_take_each_batch_once_and_capacity_from_the_busier_device() -> None:
    def run(batch: str, size: int, tokens: int, embed_ms: float, gen_ms: float) -> RunSeen:
        spans = {"embed": _span("minilm-embed:1", f"e{batch}", size, embed_ms, embed_ms + 1),
                 "search": _span("vector_search", f"s{batch}", 1, 0.0, 2.0),
                 "answer": _span("smollm2-135m:1", f"g{batch}", size, gen_ms, gen_ms + 1)}  # fmt: skip
        return RunSeen(0.1, spans, {}, {}, tokens)

    runs = [run("1", 1, 8, 10.0, 40.0), run("2", 2, 8, 14.0, 60.0), run("2", 2, 8, 14.0, 60.0)]
    cal = calibrate(runs)
    rows = {(r.model, r.batch_size, r.tokens): r.latency_us for r in cal.tables.rows}
    # a row is the time a batch held its replica: compute and the hops around it
    assert rows[("minilm-embed:1", 1, 8)] == 11_000 and rows[("minilm-embed:1", 2, 8)] == 15_000
    assert rows[("smollm2-135m:1", 2, 8)] == 61_000
    assert cal.overhead_us == 1000 and cal.tool_us == 2000
    # the generator's device (40 ms + 1 ms hop a run) is the busier one: ~24.4 runs/s
    assert cal.capacity_rps == pytest.approx(1000 / 41)


def _check(result: dict, stages: set[str], loads: list[float], n: int) -> None:
    assert result["loads"] == loads and [r["load"] for r in result["per_load"]] == loads
    for row in result["per_load"]:
        assert row["succeeded"] == {"live": n, "twin": n}
        assert set(row["stages"]) == stages and row["worst_stage"] in stages
        for fig in [row, *row["stages"].values()]:
            assert math.isfinite(fig["p50_error"]) and math.isfinite(fig["p99_error"])
        assert 0 < row["twin"]["p50_s"] <= row["twin"]["p99_s"]
    rates = [r["rate_rps"] for r in result["per_load"]]
    assert rates == sorted(rates) and rates[0] < rates[-1]  # a higher load sends faster


def test_rag_validation_stores_workflow_trace_and_load(tmp_path) -> None:
    """Tiny models, the quick calibration, 10 requests at two loads: about 20 s."""
    url = f"sqlite:///{tmp_path / 'legato.db'}"
    migrate.upgrade(url)
    args = ["sim", "validate", "--workflow", "rag", "--load", "0.3,0.9", "--requests", "10",
            "--trace", "mooncake_conversation", "--model-source", "tiny", "--quick", "--json",
            "--store", "--url", url]  # fmt: skip
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    result = json.loads(out.output.strip().splitlines()[-1])
    _check(result, RAG_STAGES, [0.3, 0.9], 10)
    assert result["trace"] == "mooncake_conversation" and result["workflow"] == "rag"
    stored = FidelityReportService(make_session_factory(make_engine(url))).latest()
    assert stored.id == result["report_id"] and stored.trace == "mooncake_conversation"
    assert (stored.config["workflow"], stored.config["load"]) == ("rag", 0.9)
    assert stored.config["result_extra"]["per_load"][0]["stages"].keys() == RAG_STAGES


def test_a_trace_without_a_dag_workflow_is_refused() -> None:
    out = CliRunner().invoke(app, ["sim", "validate", "--trace", "x.csv"])
    assert out.exit_code == 2 and "--workflow" in out.output


@pytest.mark.slow
def test_agent_validation_runs_every_stage_of_its_lookup_branch(tmp_path) -> None:
    from control.services.fidelity.dag_validate import validate_dag

    cfg = DagFidelityConfig(workflow="agent", requests=8, model_source="tiny",
                            cache_dir=str(tmp_path), calibration_sizes=(1, 2),
                            calibration_repeats=1)  # fmt: skip
    result = validate_dag(cfg, [0.5, 0.8])
    _check(result, {"route", "embed", "search", "rerank", "draft", "answer"}, [0.5, 0.8], 8)


def test_the_embed_check_takes_one_load_and_no_trace() -> None:
    out = CliRunner().invoke(app, ["sim", "validate", "--load", "0.3,0.9"])
    assert out.exit_code == 2 and "embed takes one load" in out.output
    out = CliRunner().invoke(app, ["sim", "validate", "--workflow", "chat", "--requests", "4"])
    assert out.exit_code == 2 and "workflow" in out.output
