"""``validate_dag``: a whole workflow (RAG or agent) through the live stack and the twin, at
one or more loads of a trace the twin was not tuned on.

One live session (``dag_live``): calibration bursts give the twin its tables (``dag_tables``;
a load's tables pool the calibration blocks measured right before and after its replay), then
the trace slice is replayed open-loop once per load, its mean rate ``load`` times the
measured capacity (runs/s of the busier device at batch size 1). The twin replays each load's
requests as they were sent (a generate row holds the whole capped step, so the generated token
counts are reported, ``live_output_tokens_mean``, not replayed: fewer than the cap means the
model stopped early and the row overstates the step).
Per load: end-to-end and per-stage p50/p99 of both sides and their relative errors; the stage
with the largest p99 error is named (``worst_stage``), the usual suspect where the end-to-end
error is large. The result names the trace, the workflow and the loads.
"""

from __future__ import annotations

import statistics
from typing import Any

from control import clock
from control.core.types import Request
from control.services.fidelity.dag_live import RunSeen, run_dag_live
from control.services.fidelity.dag_tables import Calibration, calibrate
from control.services.fidelity.dag_twin import StageSeen, run_dag_twin
from control.services.fidelity.dag_world import (
    GENERATE,
    TENANT,
    DagFidelityConfig,
    arrivals,
    read_trace,
)
from sim.driver import Arrival
from sim.stats import percentile


class _Plan:
    """What the live session replays once calibrated: the slice at each load."""

    def __init__(self, cfg: DagFidelityConfig, loads: list[float]) -> None:
        self.cfg, self.loads = cfg, loads
        self.trace_name, self.trace = read_trace(cfg)
        self.template = Request("cal", TENANT, cfg.workflow, prompt_tokens=cfg.min_tokens,
                                max_output_tokens=cfg.max_new_tokens)  # fmt: skip
        self.calibration: Calibration | None = None

    def slices(self, runs: list[RunSeen]) -> list[tuple[float, list[Arrival]]]:
        cfg = self.cfg
        self.calibration = calibrate(runs)
        cap = self.calibration.capacity_rps
        return [
            (load, arrivals(cfg, self.trace, load * cap, f"L{k}-"))
            for k, load in enumerate(self.loads)
        ]


def _pcts(values: list[float]) -> dict[str, float]:
    xs = sorted(values)
    return {"p50_s": round(percentile(xs, 50) or 0.0, 5),
            "p99_s": round(percentile(xs, 99) or 0.0, 5)}  # fmt: skip


def _err(twin: float, live: float) -> float:
    return round(abs(twin - live) / live, 4) if live > 0 else float("inf")


def _mean(xs: list[float]) -> float:
    return round(statistics.mean(xs), 3) if xs else 0.0


def _side(steps: list[StageSeen]) -> dict[str, float]:
    """A stage's figures on one side: its percentiles, and (the diagnostics) the mean device
    time of its batches and their mean size."""
    return _pcts([s.secs for s in steps]) | {
        "device_ms_mean": _mean([s.device_ms for s in steps]),
        "batch_size_mean": _mean([s.batch_size for s in steps]),
    }


def _stages(live: dict[str, list[StageSeen]], twin: dict[str, list[StageSeen]]) -> dict[str, Any]:
    """Per stage: both sides, the errors, and ``device_ratio`` (live over twin mean time a
    batch held its replica: above 1, the workers ran slower during the trace than the
    calibration blocks around it measured)."""
    out = {}
    for node, steps in live.items():
        a, b = _side(steps), _side(twin.get(node, []))
        ratio = a["device_ms_mean"] / b["device_ms_mean"] if b["device_ms_mean"] else None
        out[node] = {"live": a, "twin": b, "p50_error": _err(b["p50_s"], a["p50_s"]),
                     "p99_error": _err(b["p99_s"], a["p99_s"]),
                     "device_ratio": round(ratio, 3) if ratio else None}  # fmt: skip
    return out


def _live_steps(seen: dict[str, RunSeen]) -> dict[str, list[StageSeen]]:
    out: dict[str, list[StageSeen]] = {}
    for run in seen.values():
        for node, span in run.spans.items():
            took = span["end_ms"] - span["dispatched_ms"]  # as the calibration rows measure it
            step = StageSeen((span["end_ms"] - span["ready_ms"]) / 1000, took, span["batch_size"])
            out.setdefault(node, []).append(step)
    return out


def _one_load(cfg: DagFidelityConfig, cal: Calibration, load: float, sent, seen) -> dict[str, Any]:  # noqa: ANN001
    """One load's comparison: end to end (and SLO attainment over every request sent), per
    stage, and the stage with the largest p99 error."""
    twin = run_dag_twin(cfg, cal, sent)
    tokens: dict[str, list[int]] = {}
    for run in seen.values():
        for node, n in run.output_tokens.items():
            tokens.setdefault(node, []).append(n)
    twin_steps: dict[str, list[StageSeen]] = {}
    for steps in twin.stages.values():
        for node, step in steps.items():
            twin_steps.setdefault(node, []).append(step)
    live_e2e, twin_e2e = [s.e2e_s for s in seen.values()], list(twin.e2e_s.values())
    a, b = _pcts(live_e2e), _pcts(twin_e2e)
    met = sum(x <= cfg.slo_s for x in twin_e2e) - sum(x <= cfg.slo_s for x in live_e2e)
    stages = _stages(_live_steps(seen), twin_steps)
    span = max(1e-9, sent[-1].at - sent[0].at)
    return {
        "load": load, "requests": len(sent), "rate_rps": round((len(sent) - 1) / span, 3),
        "succeeded": {"live": len(seen), "twin": len(twin.e2e_s)},
        "p50_error": _err(b["p50_s"], a["p50_s"]), "p99_error": _err(b["p99_s"], a["p99_s"]),
        "slo_attainment_error_pp": round(100 * met / max(1, len(sent)), 2),
        "live": a, "twin": b, "stages": stages,
        "live_output_tokens_mean": {node: _mean(ns) for node, ns in tokens.items()},
        "worst_stage": max(stages, key=lambda n: stages[n]["p99_error"]) if stages else None,
    }  # fmt: skip


def validate_dag(cfg: DagFidelityConfig, loads: list[float]) -> dict[str, Any]:
    """The check (module docstring); the top-level figures are those of the highest load."""
    started = clock.monotonic()
    plan = _Plan(cfg, sorted(loads))
    session = run_dag_live(cfg, plan)
    assert plan.calibration is not None  # set by the session's call to ``plan.slices``
    blocks = session["calibrations"]
    cals = [calibrate(blocks[k] + blocks[k + 1]) for k in range(len(session["played"]))]
    per_load = [_one_load(cfg, cal, load, sent, seen)
                for cal, (load, sent, seen) in zip(cals, session["played"], strict=True)]  # fmt: skip
    cal = cals[-1]  # the overheads and table reported: the highest load's
    top = per_load[-1]
    return {
        "workflow": cfg.workflow, "trace": plan.trace_name, "loads": sorted(loads),
        "load": top["load"], "p50_error": top["p50_error"], "p99_error": top["p99_error"],
        "slo_attainment_error_pp": top["slo_attainment_error_pp"], "slo_s": cfg.slo_s, "live": top["live"], "twin": top["twin"],
        "per_load": per_load, "capacity_rps": round(plan.calibration.capacity_rps, 3),
        # each block's own capacity: how far the machine's speed moved during the session
        "capacity_rps_blocks": [round(calibrate(b).capacity_rps, 3) for b in blocks],
        "models": "MiniLM embed + MiniLM rerank + SmolLM2-135M" if cfg.model_source == "real"
        else "tiny random BERT + tiny random GPT-2",
        "generate_max_tokens": cfg.max_new_tokens, "overhead_us": cal.overhead_us,
        "tool_us": cal.tool_us, "run_overhead_us": cal.run_overhead_us,
        "table_us": [[r.model, r.batch_size, r.tokens, r.latency_us] for r in cal.tables.rows],
        "calibration_runs": sum(len(b) for b in blocks),
        "wall_s": round(clock.monotonic() - started, 1),
    }  # fmt: skip


__all__ = ["GENERATE", "validate_dag"]
