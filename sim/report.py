"""Reports of twin runs: per-seed figures and their means with 95% intervals over seeds.

``seed_metrics`` turns one run's :class:`~sim.metrics.Recorder` into a flat dict of scalar
figures named ``<group>.<figure>`` where group is ``all``, ``wf=<workflow>``, ``tenant=<id>`` or
``wf=<workflow>/tenant=<id>`` (e2e and TTFT p50/p95/p99 in seconds, SLO attainment, throughput,
counts), plus fleet figures (``fleet.*``: utilization, prefix-cache and preload hit rates, cost per
1k tokens, mean queue depth) and the fairness metrics of the tenancy module (``fairness.*``).
:class:`Report` holds every seed's figures, their mean and CI, and the time series of the first
seed (device utilization over time, queue depths). ``digest()`` hashes the canonical JSON: same
scenario and seeds, same digest.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from control.core.tenancy.metrics import BacklogInterval, fairness_summary
from sim.metrics import Recorder, RequestRecord
from sim.stats import mean_ci95, percentile


def _group_figures(
    recs: list[RequestRecord], span: float, ttft_slo: float | None
) -> dict[str, float]:
    ok = [r for r in recs if r.status == "succeeded" and r.end is not None]
    e2e = sorted(r.end - r.arrival for r in ok)  # type: ignore[operator]
    ttft = sorted(r.first_token - r.arrival for r in ok if r.first_token is not None)  # type: ignore[operator]

    def met(r: RequestRecord) -> bool:
        in_time = r.deadline is None or r.end <= r.deadline + 1e-9  # type: ignore[operator]
        ft_ok = ttft_slo is None or (
            r.first_token is not None and r.first_token - r.arrival <= ttft_slo
        )
        return in_time and ft_ok

    out: dict[str, float] = {
        "requests": len(recs),
        "succeeded": len(ok),
        "rejected": sum(r.status == "rejected" for r in recs),
        "failed": sum(r.status not in ("succeeded", "rejected", "running") for r in recs),
        "unfinished": sum(r.status == "running" for r in recs),
        "slo_attainment": sum(met(r) for r in ok) / len(recs) if recs else 0.0,
        "throughput_rps": len(ok) / span if span > 0 else 0.0,
    }
    for name, values in (("e2e", e2e), ("ttft", ttft)):
        for q in (50, 95, 99):
            v = percentile(values, q)
            if v is not None:
                out[f"{name}_p{q}_s"] = v
    return out


def seed_metrics(
    rec: Recorder, weights: dict[str, int], ttft_slo: dict[str, float]
) -> dict[str, float]:
    """Flat scalar figures of one run (see the module docstring for names)."""
    recs = list(rec.requests.values())
    if not recs:
        return {"all.requests": 0}
    start = min(r.arrival for r in recs)
    end = max([r.end for r in recs if r.end is not None] + [r.arrival for r in recs])
    span = max(end - start, 1e-9)
    groups: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in recs:
        for g in (
            "all",
            f"wf={r.workflow}",
            f"tenant={r.tenant}",
            f"wf={r.workflow}/tenant={r.tenant}",
        ):
            groups[g].append(r)
    out: dict[str, float] = {}
    for g, members in sorted(groups.items()):
        wf = members[0].workflow if g.startswith("wf=") else None
        slo = ttft_slo.get(wf) if wf else None
        out.update({f"{g}.{k}": v for k, v in _group_figures(members, span, slo).items()})
    out.update(_fleet(rec, start, span))
    out.update(_fairness(rec, recs, weights, start, end))
    return out


def _fleet(rec: Recorder, start: float, span: float) -> dict[str, float]:
    c = rec.counts
    out: dict[str, float] = {}
    for dev, buckets in sorted(rec.busy.items()):
        out[f"fleet.utilization.{dev}"] = sum(buckets.values()) / span
    if c.get("prefix_blocks"):
        out["fleet.prefix_hit_rate"] = c.get("prefix_hit_blocks", 0) / c["prefix_blocks"]
    outcomes = rec.preload.get("hits", 0) + rec.preload.get("misses", 0)
    out["fleet.preloads_issued"] = rec.preload.get("issued", 0)
    if outcomes:
        out["fleet.preload_hit_rate"] = rec.preload["hits"] / outcomes
    if c.get("tokens"):
        out["fleet.cost_units_per_1k_tokens"] = c.get("cost_units", 0) * 1000 / c["tokens"]
    out["fleet.loads"] = c.get("loads", 0)
    out["fleet.mean_batch_size"] = c["items"] / c["batches"] if c.get("batches") else 0.0
    if rec.queue_depth:
        out["fleet.mean_queue_depth"] = sum(sum(d.values()) for _, d in rec.queue_depth) / len(
            rec.queue_depth
        )
    return out


def _fairness(
    rec: Recorder, recs: list[RequestRecord], weights: dict[str, int], start: float, end: float
) -> dict[str, float]:
    backlog = [
        BacklogInterval(r.tenant, r.arrival, r.end)
        for r in recs
        if r.end is not None and r.status != "rejected"
    ]
    window = max((end - start) / 10, 1e-3)
    s = fairness_summary(rec.service, backlog, weights, window, window / 2, start, end)
    return {
        "fairness.max_diff": s.max_diff,
        "fairness.avg_diff": s.avg_diff,
        "fairness.jain": s.jain,
        "fairness.windows": s.windows,
    }


def seed_series(rec: Recorder) -> dict[str, Any]:
    """Time series of one run: per-device utilization per bucket, queue depth samples."""
    util = {}
    for dev, buckets in sorted(rec.busy.items()):
        n = max(buckets) + 1 if buckets else 0
        util[dev] = [round(buckets.get(k, 0.0) / rec.bucket_s, 4) for k in range(n)]
    return {
        "bucket_s": rec.bucket_s,
        "utilization": util,
        "queue_depth": [[round(t, 6), d] for t, d in rec.queue_depth],
    }


@dataclass(frozen=True)
class MetricStat:
    mean: float
    ci95: float  # half-width of the 95% interval over seeds
    per_seed: tuple[float, ...]


@dataclass(frozen=True)
class Report:
    scenario: str
    seeds: tuple[int, ...]
    per_seed: tuple[dict[str, float], ...]
    series: dict[str, Any]
    sources: tuple[str, ...] = ()
    metrics: dict[str, MetricStat] = field(default_factory=dict)

    @classmethod
    def build(cls, scenario: str, seeds: tuple[int, ...], per_seed: list[dict[str, float]],
              series: dict[str, Any], sources: tuple[str, ...] = ()) -> Report:  # fmt: skip
        """Aggregate per-seed figures: a figure missing in some seed is averaged over the
        seeds that have it (e.g. no TTFT when nothing generated)."""
        keys = sorted({k for m in per_seed for k in m})
        stats = {}
        for k in keys:
            vals = tuple(m[k] for m in per_seed if k in m)
            mean, ci = mean_ci95(vals)
            stats[k] = MetricStat(mean, ci, vals)
        return cls(scenario, seeds, tuple(per_seed), series, sources, stats)

    def get(self, key: str) -> float | None:
        s = self.metrics.get(key)
        return None if s is None else s.mean

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "seeds": list(self.seeds),
            "latency_sources": list(self.sources),
            "metrics": {
                k: {"mean": _r(s.mean), "ci95": _r(s.ci95), "per_seed": [_r(v) for v in s.per_seed]}
                for k, s in self.metrics.items()
            },  # fmt: skip
            "series": self.series,
        }

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the report."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def _r(v: float) -> float:
    return round(float(v), 9)
