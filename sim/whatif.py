"""What-if: a scenario (or several variants of it) over the same trace and seeds.

``run_scenario`` replays a scenario over its seeds and returns a :class:`~sim.report.Report`
(the placement benchmark calls it with ``placement=`` to try a plan). ``compare`` runs the
baseline and each variant (a dict of scenario sections, see :mod:`sim.scenario_io`) on the same
seeds, and returns per-variant delta tables: for each headline figure the baseline and variant
means, and the paired per-seed difference with its 95% interval; the verdict says in a sentence
whether the change is better, worse or not distinguishable on the figures that matter.
``progress(done, total, label)`` is called after every seed run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sim.metrics import Recorder
from sim.report import Report, seed_metrics, seed_series
from sim.runner import run_seed
from sim.scenario import PlacedReplica, Scenario
from sim.scenario_io import apply_variant, scenario_from_dict
from sim.stats import mean_ci95

Progress = Callable[[int, int, str], None]

#: Changes smaller than this fraction of the baseline count as no change (practical size).
MIN_RELATIVE_CHANGE = 0.02

#: Headline figures of a comparison and whether larger is better (None: neither, reported only).
HEADLINE: tuple[tuple[str, bool | None], ...] = (
    ("all.e2e_p50_s", False),
    ("all.e2e_p99_s", False),
    ("all.ttft_p99_s", False),
    ("all.slo_attainment", True),
    ("all.throughput_rps", True),
    ("all.rejected", False),
    ("fairness.jain", True),
    ("fleet.cost_units_per_1k_tokens", False),
    ("fleet.headroom_in_use", None),
)


def run_scenario(
    scenario: Scenario,
    *,
    placement: Iterable[PlacedReplica] | None = None,
    seeds: Iterable[int] | None = None,
    progress: Progress | None = None,
    label: str = "baseline",
    total: int | None = None,
    done: int = 0,
) -> Report:
    """Replay ``scenario`` (with ``placement`` instead of its own, if given) over ``seeds``
    (default: the scenario's). Returns the report; raises the core's errors on a bad fleet."""
    if placement is not None:
        scenario = replace(scenario, placement=tuple(placement))
    seeds = tuple(seeds) if seeds is not None else scenario.seeds
    weights = {t.tenant_id: t.weight for t in scenario.tenancy.tenants}
    per_seed, series = [], {}
    for i, seed in enumerate(seeds):
        run = run_seed(scenario, seed)
        figures = seed_metrics(run.recorder, weights, dict(scenario.workload.ttft_slo_s))
        in_use = headroom_in_use(scenario, run.recorder)
        if in_use is not None:
            figures["fleet.headroom_in_use"] = in_use
        per_seed.append(figures)
        if i == 0:
            series = seed_series(run.recorder)
        if progress is not None:
            progress(done + i + 1, total or len(seeds), f"{label} seed {seed}")
    return Report.build(scenario.name, seeds, per_seed, series, scenario.latency.sources)


def headroom_in_use(scenario: Scenario, rec: Recorder) -> float | None:
    """Share of the reserved capacity that was busy, over the run (None: nothing reserved on a
    serving device). Per reservation and time bucket, the busy fraction of its pool's serving
    devices above ``1 - reserved share`` counts as reserved capacity in use; summed over
    reservations and buckets, divided by the reserved capacity. Device busy time stands in for
    the core's batch slots, so this is an estimate of what the slot accounting holds back."""
    placed = {d for p in scenario.placement for d in p.device_ids}
    buckets = 1 + max((k for b in rec.busy.values() for k in b), default=0)
    in_use = reserved = 0.0
    for h in scenario.tenancy.headroom:
        pool, share = sorted(placed & h.device_ids), h.reserved_milli / 1000
        if not pool or share <= 0:
            continue
        for k in range(buckets):
            busy = sum(rec.busy[d].get(k, 0.0) for d in pool if d in rec.busy)
            in_use += max(0.0, busy / (rec.bucket_s * len(pool)) - (1 - share)) * len(pool)
            reserved += share * len(pool)
    return in_use / reserved if reserved else None


@dataclass(frozen=True)
class DeltaRow:
    metric: str
    baseline: float
    variant: float
    delta: float  # variant - baseline, mean of per-seed differences
    ci95: float  # half-width of the paired interval
    better: bool | None  # None: no distinguishable change, or a figure neither way better


@dataclass(frozen=True)
class Comparison:
    name: str
    rows: tuple[DeltaRow, ...]
    verdict: str
    report: Report

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.name,
            "verdict": self.verdict,
            "deltas": [r.__dict__ for r in self.rows],
        }


def delta_table(base: Report, var: Report) -> tuple[DeltaRow, ...]:
    """Paired differences (same seeds) of the headline figures both reports have."""
    rows = []
    for key, higher_better in HEADLINE:
        b, v = base.metrics.get(key), var.metrics.get(key)
        if b is None or v is None or len(b.per_seed) != len(v.per_seed):
            continue
        mean, ci = mean_ci95([y - x for x, y in zip(b.per_seed, v.per_seed, strict=True)])
        # significant: the interval excludes 0 and the change is not negligible in size
        sig = abs(mean) > ci and abs(mean) > MIN_RELATIVE_CHANGE * max(abs(b.mean), 1e-9)
        better = None if not sig or higher_better is None else (mean > 0) == higher_better
        rows.append(DeltaRow(key, b.mean, v.mean, mean, ci, better))
    return tuple(rows)


def verdict(name: str, rows: tuple[DeltaRow, ...]) -> str:
    """One sentence: what got better, what got worse, at 95% confidence over the seeds."""
    good = [r.metric for r in rows if r.better is True]
    bad = [r.metric for r in rows if r.better is False]
    if not good and not bad:
        return f"{name}: no difference the seeds can distinguish from the baseline."
    head = "better" if good and not bad else "worse" if bad and not good else "mixed"
    parts = ([f"better on {', '.join(good)}"] if good else []) + (
        [f"worse on {', '.join(bad)}"] if bad else []
    )
    return f"{name}: {head} than the baseline ({'; '.join(parts)})."


def compare(
    base_raw: Mapping[str, Any],
    variants: Mapping[str, Mapping[str, Any]],
    *,
    seeds: Iterable[int] | None = None,
    progress: Progress | None = None,
) -> tuple[Report, list[Comparison]]:
    """Baseline and each variant over the same seeds; returns the baseline report and one
    comparison per variant (in the given order)."""
    base = scenario_from_dict(base_raw)
    seeds = tuple(seeds) if seeds is not None else base.seeds
    total = len(seeds) * (1 + len(variants))
    base_report = run_scenario(base, seeds=seeds, progress=progress, total=total)
    out = []
    for i, (name, changes) in enumerate(variants.items()):
        sc = scenario_from_dict(apply_variant(base_raw, changes))
        rep = run_scenario(
            sc, seeds=seeds, progress=progress, label=name, total=total, done=len(seeds) * (i + 1)
        )
        rows = delta_table(base_report, rep)
        out.append(Comparison(name, rows, verdict(name, rows), rep))
    return base_report, out
