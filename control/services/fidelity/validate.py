"""``validate_fidelity``: one trace slice through the live stack and through the twin.

Called by ``legato sim validate``. In order: a live session (``live.run_live``: warm-up, an
in-worker profile block, then ``slice_repeats`` rounds of the slice open-loop each followed by
another block); the twin on the very same request list of each round, with the table of the
two blocks around that round (their samples pooled) and the measured overheads (``twin``), ``twin_draws`` times with
different seeds of the device-time scatter; the comparison (``compare``) over every round's
requests pooled (and every draw, on the twin side): ``p50_error`` / ``p99_error`` are relative
errors of the twin's percentile against the live one, ``slo_attainment_error_pp`` is twin minus
live SLO attainment in percentage points, the SLO being ``slo_s`` end to end (fixed in the
config, never fitted).

Beside the figures, diagnostics say where an error comes from: ``live``/``twin`` break each
side's time down (batch sizes formed, device time of a request's batch, waiting);
``device_ratio`` is measured over predicted device time of the slice's batches (per round:
``round_device_ratio``);
``replayed_device_errors`` are the errors of a twin that is given the live batches' measured
device times (what is left is batching, queueing and overheads); ``profile_drift``,
``load_avg`` and ``machine`` say whether the machine held still, ``nice`` the priority the live
side ran at and ``worker_cpu_ms`` per phase how long the worker ran and waited for its core.

The trace is the shipped Azure code slice; prompt lengths are scaled by ``token_divisor`` and
clamped to what the embedding model reads, and time is scaled so that the slice offers
``target_utilization`` of the worker as measured (unless ``rate_factor`` is given).
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from control import clock
from control.services.fidelity.compare import (
    GOAL,
    compare_sides,
    goal_met,
    pooled,
    side_dict,
    spread,
    summarize,
)
from control.services.fidelity.config import MODEL_KEY, TRACE, FidelityConfig
from control.services.fidelity.live import run_live
from control.services.fidelity.records import LiveOutcome, RequestSeen
from control.services.fidelity.twin import run_twin_pooled, run_twin_replayed
from control.services.fidelity.world import fidelity_scenario
from sim.scenario import LatencyTables, Scenario


def _drift(before, after) -> float:  # noqa: ANN001
    """Mean after/before ratio of the two in-worker tables (1.0: the machine held still)."""
    a = {(r.batch_size, r.tokens): r.latency_us for r in after}
    ratios = [a[(r.batch_size, r.tokens)] / r.latency_us for r in before
              if (r.batch_size, r.tokens) in a and r.latency_us > 0]  # fmt: skip
    return round(sum(ratios) / len(ratios), 3) if ratios else 1.0


def _table(before, after) -> list[list[int]]:  # noqa: ANN001
    """[batch size, tokens, before us, after us] per measured point (0: not measured)."""
    a = {(r.batch_size, r.tokens): r.latency_us for r in after}
    b = {(r.batch_size, r.tokens): r.latency_us for r in before}
    return [[bs, t, b.get((bs, t), 0), a.get((bs, t), 0)] for bs, t in sorted(a.keys() | b.keys())]


def device_ratios(seen, tokens, latency) -> list[float]:  # noqa: ANN001
    """Measured / predicted device time of each batch of ``seen`` (batches are told apart by
    their (size, device time) pair, which the items of one batch share)."""
    batches: dict[tuple[int, float], list[str]] = {}
    for rid, s in seen.items():
        batches.setdefault((s.batch_size, round(s.device_ms, 3)), []).append(rid)
    ratios = []
    for (size, device_ms), rids in batches.items():
        longest = max(tokens[r] for r in rids)
        ratios.append(device_ms / (latency.forward_us(MODEL_KEY, "cpu", size, longest) / 1000))
    return ratios


def device_ratio(seen, tokens, latency) -> float | None:  # noqa: ANN001
    """Median over the slice's batches of measured / predicted device time: how well the table
    describes the batches the slice really ran (1.0: exactly)."""
    ratios = device_ratios(seen, tokens, latency)
    return round(statistics.median(ratios), 3) if ratios else None


def _load() -> float | None:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None


def _round_scenario(cfg: FidelityConfig, live: LiveOutcome, table) -> Scenario:  # noqa: ANN001
    scenario = fidelity_scenario(cfg, table, live.rate_factor)
    return replace(
        scenario,
        latency=LatencyTables(table, sources=scenario.latency.sources),
        executor=replace(scenario.executor, service_sigma_milli=live.sigma_milli),
    )


@dataclass
class _TwinRounds:
    """The twin's side of every round: ``draws`` (per draw, every round's requests pooled),
    ``replayed`` (end-to-end seconds of the twin given the live device times) and the measured
    over predicted device-time ``ratios`` of each side's batches."""

    draws: list[dict[str, RequestSeen]] = field(default_factory=list)
    replayed: dict[str, float] = field(default_factory=dict)
    ratios: dict[str, list[float]] = field(default_factory=lambda: {"live": [], "twin": []})


def _replay_rounds(cfg: FidelityConfig, live: LiveOutcome, tokens: dict[str, int]) -> _TwinRounds:
    """Each live round through the twin, with the table measured around that round."""
    out = _TwinRounds()
    for rnd in live.rounds:
        scenario = _round_scenario(cfg, live, rnd.table)
        runs = run_twin_pooled(scenario, rnd.requests, live.overheads, cfg.twin_draws)
        out.draws.extend({} for _ in range(len(runs) - len(out.draws)))
        for k, run in enumerate(runs):
            out.draws[k] |= run
        device = {k: s.device_ms for k, s in rnd.seen.items()}
        out.replayed |= run_twin_replayed(scenario, rnd.requests, live.overheads, device)
        model = scenario.latency.model()
        out.ratios["live"] += device_ratios(rnd.seen, tokens, model)
        out.ratios["twin"] += device_ratios(runs[0], tokens, model)
    return out


def _figures(
    cfg: FidelityConfig, live: LiveOutcome, twin: _TwinRounds, tokens: dict[str, int]
) -> dict[str, Any]:
    """The comparison of both sides and its diagnostics (every key of the result but the load
    average, the wall time, ``goal_met`` and ``machine``)."""
    total, draws = len(live.requests), twin.draws
    twin_seen = pooled(draws)
    live_side = summarize({k: s.e2e_s for k, s in live.seen.items()}, total, cfg.slo_s)
    twin_side = summarize({k: s.e2e_s for k, s in twin_seen.items()}, total * len(draws),
                          cfg.slo_s)  # fmt: skip
    # requests that succeeded per replay, as the live side counts them (not over every draw)
    twin_side = replace(twin_side, succeeded=round(twin_side.succeeded / len(draws)))
    p50, p99, slo_pp = compare_sides(live_side, twin_side)
    errors_replayed = compare_sides(live_side, summarize(twin.replayed, total, cfg.slo_s))
    return {
        "p50_error": round(p50, 4),
        "p99_error": round(p99, 4),
        "slo_attainment_error_pp": round(slo_pp, 2),
        "live": side_dict(live_side, live.seen),
        "twin": side_dict(twin_side, twin_seen),
        "requests": total,
        "rounds": len(live.rounds),
        "twin_draws": len(draws),
        "rate_factor": live.rate_factor,
        "overhead_us": live.overheads.busy_us,
        "run_overhead_us": live.overheads.run_us,
        "service_sigma_milli": live.sigma_milli,
        "profile_rows": len(live.rounds[0].table) if live.rounds else 0,
        "profile_drift": _drift(live.before, live.after),
        "table_us": _table(live.before, live.after),
        "replayed_device_errors": dict(
            zip(GOAL, (round(e, 4) for e in errors_replayed), strict=True)
        ),
        "device_ratio": {side: _median(r) for side, r in twin.ratios.items()},
        "round_device_ratio": [
            _median(device_ratios(rnd.seen, tokens, LatencyTables(rnd.table).model()))
            for rnd in live.rounds
        ],
        "nice": live.nice,
        "worker_cpu_ms": live.cpu_ms,
    }


def validate_fidelity(config: FidelityConfig | None = None) -> dict[str, Any]:
    """Live session, twin, comparison (see the module docstring). Loads a real model and runs
    for about a minute; returns the result as a JSON-ready dict."""
    cfg = config or FidelityConfig()
    started, load_before = clock.monotonic(), _load()
    live = run_live(cfg)
    tokens = {a.request.request_id: a.request.prompt_tokens for a in live.requests}
    result = _figures(cfg, live, _replay_rounds(cfg, live, tokens), tokens)
    result["load_avg"] = {"before": load_before, "after": _load()}
    result["wall_s"] = round(clock.monotonic() - started, 1)
    result["goal_met"] = goal_met(result)
    result["machine"] = machine_note(result["profile_drift"], result["load_avg"]["after"])
    return result


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 3) if xs else None


def machine_note(drift: float, load: float | None, cores: int | None = None) -> str:
    """Whether this machine held still enough for the figures to mean much: the two in-worker
    tables within 15% of each other and the load average below the core count."""
    cores = cores or os.cpu_count() or 1
    problems = []
    if abs(drift - 1.0) > 0.15:
        problems.append(f"device times moved {100 * (drift - 1):+.0f}% during the run")
    if load is not None and load >= cores:
        problems.append(f"load average {load:.1f} on {cores} cores")
    if not problems:
        return "quiet"
    return "noisy: " + "; ".join(problems) + " (other processes compete for the CPU)"


def validate_repeated(
    config: FidelityConfig | None = None,
    runs: int = 3,
    validate: Callable[[FidelityConfig | None], dict[str, Any]] = validate_fidelity,
) -> dict[str, Any]:
    """``runs`` independent validations (``validate``: a fresh worker each). The figures are the
    medians over the runs, ``spread`` gives min..max of each error, ``runs`` every run's result,
    and ``live``/``twin`` are the summaries of the run whose p99 error is the median one."""
    if runs < 1:
        raise ValueError(f"validate_repeated: runs={runs} must be >= 1")
    results = [validate(config) for _ in range(runs)]
    if runs == 1:
        return results[0]
    middle = sorted(results, key=lambda r: r["p99_error"])[runs // 2]
    summary = spread(results)
    out = {key: summary[key]["median"] for key in summary}
    out |= {"live": middle["live"], "twin": middle["twin"], "spread": summary,
            "runs": results, "requests": middle["requests"],
            "machine": "; ".join(f"run {i + 1}: {r['machine']}" for i, r in enumerate(results))}  # fmt: skip
    out["goal_met"] = goal_met(out)
    return out


def config_dict(cfg: FidelityConfig) -> dict[str, Any]:
    """The config as stored with a report (tuples become lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()}


__all__ = ["TRACE", "config_dict", "validate_fidelity", "validate_repeated"]
