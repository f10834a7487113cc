"""What the whole-DAG twin is given, all measured on the calibration runs (never the trace).

Per model and batch size, a table row keyed by the run's query tokens: the median time a batch
of that size held its replica, dispatch to result (the worker's compute plus the process hops
around it, which differ per model: a generator's are not an encoder's) (the twin asks the table at the request's query tokens
for every stage, so the reranker's and the generator's longer inputs, which grow with the
query, are inside their rows). A generate row holds the whole step (prefill and the capped
decode), its decode rows are zero. Beside the tables: the median hop of a model step (reported;
already inside the rows), a host tool's time, the per-run overhead (off any
replica's path) and the capacity the load is a fraction of.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from control.core.latency import DecodeRow, LatencyRow
from control.services.fidelity.dag_live import RunSeen
from control.services.fidelity.dag_world import placement
from sim.scenario import LatencyTables


@dataclass(frozen=True)
class Calibration:
    tables: LatencyTables
    overhead_us: int  # median process hops of a model batch (inside the rows; reported)
    tool_us: int  # a host tool step
    run_overhead_us: int  # per run, beside the steps
    capacity_rps: float  # runs/s the busier device serves at batch size 1


def _med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def calibrate(runs: list[RunSeen]) -> Calibration:
    """The twin's tables and overheads from the calibration ``runs``."""
    samples: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    seen_batches: set[str] = set()
    hops, tools, beside = [], [], []
    for run in runs:
        for span in run.spans.values():
            took = span["end_ms"] - span["dispatched_ms"]
            if span["model"] not in placement():
                tools.append(took)
                continue
            hops.append(span["transfer_ms"])
            if span["batch_id"] not in seen_batches:
                seen_batches.add(span["batch_id"])
                key = (span["model"], span["batch_size"], run.prompt_tokens)
                samples[key].append(took)
        last = max((s["end_ms"] for s in run.spans.values()), default=0.0)
        beside.append(run.e2e_s * 1000 - last)
    rows = tuple(LatencyRow(m, "cpu", b, t, max(1, round(_med(ms) * 1000)))
                 for (m, b, t), ms in sorted(samples.items()))  # fmt: skip
    decode = tuple(DecodeRow(m, "cpu", 0, 0) for m in placement())
    tables = LatencyTables(rows, decode, sources=("measured in the serving workers (calibration)",))
    overhead_us = max(0, round(_med(hops) * 1000))
    return Calibration(tables, overhead_us, max(1, round(_med(tools) * 1000)),
                       max(0, round(_med(beside) * 1000)),
                       _capacity(samples))  # fmt: skip


def _capacity(samples: dict[tuple[str, int, int], list[float]]) -> float:
    """Runs/s of the busier device when every stage runs alone (batch size 1, the mean over
    the calibrated query lengths): the load's 1.0."""
    busy: dict[str, float] = defaultdict(float)
    for model, device in placement().items():
        ones = [_med(ms) for (m, b, _), ms in samples.items() if m == model and b == 1]
        busy[device] += statistics.mean(ones) if ones else 0.0
    worst = max(busy.values(), default=0.0)
    return 1000.0 / worst if worst > 0 else 1.0
