"""Fairness benchmark: replay ServeGen per-tenant arrivals through the real ``ControlCore``.

The core is assembled by ``control.core.assembly.build_core`` (the real ``TenancyManager`` with
the policy under test) and driven by the plain replay driver of ``tests/support/replay.py``. The
device is one GPU-like accelerator doing continuous batching: its 32 KV-cache slots are 32
single-sequence replicas of ``llm:1`` on one device, so a finished sequence frees a slot that
the core refills at once. The core binds late (its default): ready requests wait unbound in the
model's pending queue, and a slot takes the next request in the fair-share order of the whole
model when it frees up, so a light tenant never waits behind the request another slot holds. A sequence's time follows the iteration cost of the running set:
each decode iteration costs a fixed base plus a small per-running-sequence term, its prompt is
prefilled in the iteration it joins. The core predicts with the same profile as a latency table.
Prints only JSON.

Scenarios, per policy (vtc, fcfs, rate_limit):
- fairness: three tenants (ServeGen m-small clients 12, 36, 14; weights 1, 2, 1) offered 300,
  40 and 240 requests/s together with about 120 requests/s of capacity (~15k tokens/s); the
  metrics compare tenants only while they are backlogged (queues are bounded, the excess is
  refused at admission); Max/Avg Diff and Diff Var of weighted service between
  backlogged tenants over 20 s windows, Jain's index, token throughput.
- isolation: a light tenant (client 26) beside a flooding heavy one (client 14); the light
  tenant's p99 latency relative to running alone.
"""

from __future__ import annotations

import bisect
import csv
import json
import math
import random
import sys
from dataclasses import dataclass
from pathlib import Path

# run as `python bench/fairness.py` from the repo root: make the project importable
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from control import native  # noqa: E402

native.install()  # before the core is imported: the compiled core when a build is current

from control.core.actions import Dispatch, LoadModel, Reject, RunFinished, StepPlan  # noqa: E402
from control.core.assembly import CoreBlueprint, build_core  # noqa: E402
from control.core.dag.spec import dag_from_dict  # noqa: E402
from control.core.events import ReplicaLoaded  # noqa: E402
from control.core.latency import DecodeRow, LatencyRow, TableLatencyModel  # noqa: E402
from control.core.tenancy.base import TenancyConfig, TenantSpec  # noqa: E402
from control.core.tenancy.config import TenancyManagerConfig  # noqa: E402
from control.core.tenancy.cost import CostModel  # noqa: E402
from control.core.tenancy.fairshare.rate_limit import RateLimitConfig  # noqa: E402
from control.core.tenancy.metrics import (  # noqa: E402
    BacklogInterval,
    ServiceSample,
    fairness_summary,
    jain_index,
)
from control.core.types import BatchResult, DeviceSpec, ModelSpec, Request, StepResult  # noqa: E402
from tests.support.replay import Arrival, ReplayDriver, SimExecutor  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "sim" / "traces" / "data" / "servegen"
QUANTILES = (0.01, 0.05, 0.10, 0.25, 0.50, 0.75, 0.90, 0.95, 0.99, 1.0)
MODEL_KEY = "llm:1"
DEVICE = "gpu0"


@dataclass(frozen=True)
class LatencyProfile:
    base_ms: float = 20.0  # one decode iteration, memory-bound: weights read once per step
    per_seq_ms: float = 0.15  # extra per running sequence
    prefill_ms_per_token: float = 0.01  # prompt tokens processed in the iteration they join
    max_running: int = 32  # KV-cache slots (single-sequence replicas on the device)
    max_output_tokens: int = 512  # serving cap on generated tokens

    def iteration_ms(self, running: int, prefill_tokens: int) -> float:
        return self.base_ms + self.per_seq_ms * running + self.prefill_ms_per_token * prefill_tokens

    def table(self) -> TableLatencyModel:
        """The same profile as the core's latency table (one sequence per replica)."""
        rows = [
            LatencyRow(MODEL_KEY, "gpu", 1, t, round(self.prefill_ms_per_token * t * 1000))
            for t in (1, 8192)
        ]
        decode = DecodeRow(
            MODEL_KEY,
            "gpu",
            round(self.iteration_ms(self.max_running, 0) * 1000) - round(self.per_seq_ms * 1000),
            round(self.per_seq_ms * 1000),
        )
        return TableLatencyModel(rows, [decode])


MODEL = LatencyProfile()
# cost scale from the same profile: us per prompt token vs us per generated token at full batch
COSTS = CostModel.from_profiles(
    {MODEL_KEY: round(MODEL.prefill_ms_per_token * 1000)},
    {MODEL_KEY: round(MODEL.iteration_ms(MODEL.max_running, 0) * 1000 / MODEL.max_running)},
)
WORKFLOW = {
    "workflow": "chat",
    "inputs": {"prompt": "text"},
    "outputs": {"text": "llm.text"},
    "nodes": [{"id": "llm", "task": "generate", "model": MODEL_KEY}],
    "edges": [{"from": "input.prompt", "to": "llm.prompt"}],
}


@dataclass(frozen=True)
class Req:
    rid: str
    tenant: str
    arrival: float
    input_tokens: int
    output_tokens: int

    @property
    def cost(self) -> int:
        return COSTS.cost_units(MODEL_KEY, self.input_tokens, self.output_tokens)


def _client(cid: int) -> tuple[list[list[str]], dict[str, list[float]]]:
    with open(DATA / f"chunk-{cid}-trace.csv") as fh:
        windows = [row for row in csv.reader(fh) if row and row[3]]
    tokens: dict[str, list[float]] = {}
    with open(DATA / "token_stats.csv") as fh:
        for row in csv.DictReader(fh):
            if int(row["client_id"]) == cid and int(row["window_start_s"]) == 0:
                tokens[row["field"]] = [float(row[f"q{round(q * 100):02d}"]) for q in QUANTILES]
    return windows, tokens


def _inverse_cdf(quantiles: list[float], rng: random.Random) -> int:
    u = rng.uniform(QUANTILES[0], 1.0)
    i = max(1, bisect.bisect_left(QUANTILES, u))
    lo, hi = QUANTILES[i - 1], QUANTILES[i]
    value = quantiles[i - 1] + (quantiles[i] - quantiles[i - 1]) * (u - lo) / (hi - lo)
    return max(1, round(value))


def arrivals(cid: int, tenant: str, rate_rps: float, duration: float, seed: int) -> list[Req]:
    """Arrivals shaped by the client's busiest-window fit, scaled to ``rate_rps``."""
    windows, tokens = _client(cid)
    _, _, _, dist, shape, scale = max(windows, key=lambda w: float(w[1]))
    rng = random.Random(seed)
    n = math.ceil(rate_rps * duration)
    draw = (
        (lambda: rng.gammavariate(float(shape), float(scale)))
        if dist == "Gamma"
        else (lambda: rng.weibullvariate(float(scale), float(shape)))
    )
    gaps = [draw() for _ in range(n)]
    factor = duration / sum(gaps)  # rescaled to the span, as upstream rescales to its window
    out, t = [], 0.0
    for i, gap in enumerate(gaps):
        t += gap * factor
        out.append(
            Req(
                f"{tenant}-{i}",
                tenant,
                t,
                _inverse_cdf(tokens["input_tokens"], rng),
                min(MODEL.max_output_tokens, _inverse_cdf(tokens["output_tokens"], rng)),
            )
        )
    return out


class SlotDriver(ReplayDriver):
    """The replay driver with a continuous-batching device: a sequence's time depends on how
    many slots are busy when it starts (the driver still decides nothing)."""

    def __init__(self, core, executor, on_step) -> None:  # noqa: ANN001
        super().__init__(core, executor, on_step)
        self.running = 0
        self.arrived: list[Request] = []

    def _record(self, kind: str, payload: object, now: float) -> None:
        if kind == "arrival":
            self.arrived.append(payload)  # type: ignore[arg-type]
        elif kind == "done":
            self.running -= 1
        super()._record(kind, payload, now)

    def _carry_out(self, action: object, now: float) -> None:
        if not isinstance(action, Dispatch):
            if isinstance(action, LoadModel):
                raise AssertionError(f"no load expected in this bench: {action}")
            return
        self.running += 1
        item = action.items[0]
        us = round(
            MODEL.prefill_ms_per_token * item.input_tokens * 1000
            + item.max_output_tokens * MODEL.iteration_ms(self.running, 0) * 1000
        )
        res = StepResult(item.key, True, item.input_tokens, item.max_output_tokens, 0, True)
        self._push(now + us / 1e6, "done", BatchResult(action.batch_id, us, (res,)))


class CoreHarness:
    """Runs requests through a ``ControlCore`` and records service, backlog and latency."""

    def __init__(self, policy: str, weights: dict[str, int], rate_limit: RateLimitConfig) -> None:
        cfg = TenancyManagerConfig(
            fair_share=policy,
            default_max_queued_runs=2048,
            fair_share_config=rate_limit if policy == "rate_limit" else None,
        )
        model = ModelSpec("llm", "1", "generate", 100, max_batch_size=1, max_batch_tokens=1 << 20)
        device = DeviceSpec(DEVICE, "node0", "gpu", "gpu", 100 * MODEL.max_running)
        blueprint = CoreBlueprint(
            devices=(device,),
            models=(model,),
            workflows=(dag_from_dict(WORKFLOW),),
            tenancy=TenancyConfig(tuple(TenantSpec(t, w) for t, w in weights.items())),
            cost=COSTS,
            tenancy_config=cfg,
        )
        self.core = build_core(blueprint, MODEL.table())
        for slot in range(MODEL.max_running):
            self.core.ingest(ReplicaLoaded(f"slot{slot:02d}", MODEL_KEY, (DEVICE,)), 0.0)
        self.requests: dict[str, Req] = {}
        self.queued_per_tenant: dict[str, int] = {}
        self.backlog_since: dict[str, float] = {}
        self.backlog: list[BacklogInterval] = []
        self.service: list[ServiceSample] = []
        self.latency: dict[str, list[float]] = {}
        self.done_tokens = 0

    def _queued(self, tenant: str, delta: int, now: float) -> None:
        count = self.queued_per_tenant.get(tenant, 0) + delta
        self.queued_per_tenant[tenant] = count
        if count == 1 and delta > 0:
            self.backlog_since[tenant] = now
        elif count == 0:
            self.backlog.append(BacklogInterval(tenant, self.backlog_since.pop(tenant), now))

    def _observe(self, now: float, plan: StepPlan) -> None:
        rejected = {a.request_id for a in plan.of_type(Reject)}
        for req in self.driver.arrived:
            if req.request_id not in rejected:
                self._queued(req.tenant_id, 1, now)
        self.driver.arrived.clear()
        for action in plan.actions:
            if isinstance(action, Dispatch):
                req = self.requests[action.items[0].request_id]
                self.service.append(ServiceSample(now, req.tenant, req.cost))
                self._queued(req.tenant, -1, now)
            elif isinstance(action, RunFinished):
                req = self.requests[action.request_id]
                self.latency.setdefault(req.tenant, []).append(now - req.arrival)
                self.done_tokens += req.input_tokens + req.output_tokens

    def run(self, reqs: list[Req], duration: float) -> CoreHarness:
        self.requests = {r.rid: r for r in reqs}
        arrivals = [
            Arrival(
                r.arrival,
                Request(
                    r.rid,
                    r.tenant,
                    "chat",
                    prompt_tokens=r.input_tokens,
                    max_output_tokens=r.output_tokens,
                ),
            )  # fmt: skip
            for r in sorted(reqs, key=lambda r: (r.arrival, r.rid))
        ]
        executor = SimExecutor(MODEL.table(), {DEVICE: "gpu"})
        self.driver = SlotDriver(self.core, executor, self._observe)
        self.driver.run(arrivals, until=duration)
        for tenant, since in self.backlog_since.items():
            self.backlog.append(BacklogInterval(tenant, since, duration))
        return self


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


FAIR_WEIGHTS = {"c12": 1, "c36": 2, "c14": 1}
FAIR_DURATION, ISO_DURATION, WINDOW_S = 60.0, 30.0, 20.0


def fairness_workload() -> list[Req]:
    # offered load per tenant above the whole device's capacity: all stay backlogged
    return (
        arrivals(12, "c12", 300, FAIR_DURATION, 1)
        + arrivals(36, "c36", 40, FAIR_DURATION, 2)
        + arrivals(14, "c14", 240, FAIR_DURATION, 3)
    )


def isolation_workload() -> tuple[list[Req], list[Req]]:
    light = arrivals(26, "light", 20, ISO_DURATION, 4)
    return light, arrivals(14, "heavy", 500, ISO_DURATION, 5)


def main() -> None:
    fair_reqs = fairness_workload()
    light, heavy = isolation_workload()
    iso_weights = {"light": 1, "heavy": 1}
    solo = CoreHarness("fcfs", iso_weights, RateLimitConfig()).run(light, ISO_DURATION)
    solo_p99 = _p99(solo.latency["light"])
    c_max = max(r.cost for r in fair_reqs)
    bound = 2 * c_max / min(FAIR_WEIGHTS.values())
    result: dict[str, object] = {
        "harness": "ControlCore via assembly.build_core + tests/support/replay.ReplayDriver; 32 single-sequence replicas on one device (continuous batching); late binding (per-model pending queue in fair-share order)",
        "latency_model": MODEL.__dict__
        | {
            "cost_milli_per_input_token": COSTS.weights[MODEL_KEY].input_milli,
            "cost_milli_per_output_token": COSTS.weights[MODEL_KEY].output_milli,
        },
        "trace": "ServeGen language m-small clients 12, 14, 26, 36 (sim/traces/data/servegen)",
        "vtc_bound_cost_units": bound,
        "light_solo_p99_s": round(solo_p99, 4),
    }
    for policy in ("vtc", "fcfs", "rate_limit"):
        # rate limit: each tenant's weighted share of the device's request capacity per second
        limit = RateLimitConfig(max_requests=60, window_s=1.0)
        fair = CoreHarness(policy, FAIR_WEIGHTS, limit).run(fair_reqs, FAIR_DURATION)
        summary = fairness_summary(
            fair.service, fair.backlog, FAIR_WEIGHTS, WINDOW_S, 1.0, 0.0, FAIR_DURATION
        )
        totals = [
            sum(s.amount for s in fair.service if s.tenant_id == t) / w
            for t, w in FAIR_WEIGHTS.items()
        ]
        iso = CoreHarness(policy, iso_weights, RateLimitConfig(max_requests=20, window_s=1.0)).run(
            light + heavy, ISO_DURATION
        )
        result[policy] = {
            "max_diff": round(summary.max_diff, 1),
            "avg_diff": round(summary.avg_diff, 1),
            "diff_var": round(summary.diff_var, 1),
            "jain": round(summary.jain, 4),
            "jain_whole_run": round(jain_index(totals), 4),
            "windows_compared": summary.windows,
            "within_vtc_bound": summary.max_diff <= bound,
            "throughput_tokens_per_s": round(fair.done_tokens / FAIR_DURATION, 1),
            "light_p99_vs_solo": round(_p99(iso.latency.get("light", [math.inf])) / solo_p99, 3),
            "light_completed": len(iso.latency.get("light", [])),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
