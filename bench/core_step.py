"""Benchmark of the decision core: dispatch decisions per second at 8, 64 and 512 replicas.

Steady state with 1,000 requests outstanding: each round completes the batches of the previous
round, submits as many new single-step requests as finished, and times ``step(now)``. A
decision is one step dispatched in a batch; its time is the whole ``step`` (admission, DAG
bookkeeping, completions, routing, stealing and batching), so the figure is end to end.
Prints one JSON line.

    python bench/core_step.py
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control.core.actions import Dispatch  # noqa: E402
from control.core.types import BatchResult, DeviceSpec, ModelSpec, Request, StepResult  # noqa: E402
from control.runtime.clock import perf_counter  # noqa: E402
from tests.core.fakes import FcfsTenancy  # noqa: E402
from tests.support.builders import latency, make_core, single  # noqa: E402

QUEUED = 1000
ROUNDS = 40


class LeanTenancy(FcfsTenancy):
    """FCFS without the call log (the bench measures the core, not the fake's bookkeeping)."""

    def on_enqueue(self, item, now):  # noqa: ANN001, ANN201
        return None

    def on_dequeue(self, key, now):  # noqa: ANN001, ANN201
        return None

    def admit(self, req, now):  # noqa: ANN001, ANN201
        from control.core.tenancy.base import Admitted

        return Admitted(req.request_id, False, "bench")

    def release(self, request_id, used_tokens, used_cost_units, now):  # noqa: ANN001, ANN201
        return None


def world(n_replicas: int):  # noqa: ANN201
    n_models = min(16, n_replicas)
    models = [ModelSpec(f"m{i}", "1", "embed", 100, max_batch_size=8) for i in range(n_models)]
    devs = [
        DeviceSpec(f"d{i:04d}", f"n{i // 8}", "gpu", "gpu-a", 1000, f"n{i // 8}")
        for i in range(n_replicas)
    ]
    reps = [(models[i % n_models].key, devs[i].device_id) for i in range(n_replicas)]
    core = make_core(
        LeanTenancy(), models, devs, reps, [single(m) for m in models], lat=latency(models)
    )
    return core, models


def run(n_replicas: int) -> dict:
    core, models = world(n_replicas)
    seq = 0

    def submit(k: int, now: float) -> None:
        nonlocal seq
        for _ in range(k):
            m = models[seq % len(models)]
            core.submit(
                Request(f"q{seq}", f"t{seq % 7}", f"only-{m.name}", prompt_tokens=64 + seq % 200),
                now,
            )
            seq += 1

    submit(QUEUED, 0.0)
    inflight: list[Dispatch] = []
    per_decision: list[float] = []
    total_time = 0.0
    decisions = 0
    now = 0.0
    for rnd in range(ROUNDS + 2):
        now += 0.001
        for d in inflight:
            core.complete(
                BatchResult(
                    d.batch_id,
                    1000,
                    tuple(StepResult(i.key, input_tokens=i.input_tokens) for i in d.items),
                ),
                now,
            )
        submit(sum(len(d.items) for d in inflight), now)
        t0 = perf_counter()
        plan = core.step(now)
        dt = perf_counter() - t0
        inflight = [a for a in plan.actions if isinstance(a, Dispatch)]
        made = sum(len(d.items) for d in inflight)
        if rnd >= 2:  # first rounds warm caches and fill queues
            total_time += dt
            decisions += made
            if made:
                per_decision.append(dt / made * 1e6)
    return {
        "replicas": n_replicas,
        "models": len(models),
        "decisions": decisions,
        "decisions_per_s": round(decisions / total_time),
        "us_per_decision_p50": round(statistics.median(per_decision), 2),
    }


def main() -> None:
    results = {n: run(n) for n in (8, 64, 512)}
    main_r = results[64]
    out = {
        "decisions_per_s": main_r["decisions_per_s"],
        "us_per_decision_p50": main_r["us_per_decision_p50"],
        "replicas": 64,
        "models": main_r["models"],
        "queued_requests": QUEUED,
        "by_replicas": {str(n): r for n, r in results.items()},
        "growth_us_per_decision_512_over_8": round(
            results[512]["us_per_decision_p50"] / results[8]["us_per_decision_p50"], 2
        ),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
