"""Placement plans for a scenario: the core's placement policies, fed from the scenario itself.

``scenario_demand`` turns the scenario's workload (its arrivals for one seed) into the planner's
``Demand``: each workflow's peak request rate over a window of the trace (bursts), and each model's mean device
time per request at a stated batch size, predicted by the scenario's own latency tables from the
trace's mean prompt and output lengths (node ``input_tokens`` params win, as in the core).
``plan_placement`` runs a registered policy (``planner``, ``naive``, ...) on the scenario's
fleet and returns the plan as the scenario's ``PlacedReplica`` rows, ready for
``sim.whatif.run_scenario(scenario, placement=...)``. ``capacity`` finds the highest trace rate
a layout sustains under one SLO rule (:func:`within_slo`), the throughput figure of a placement
comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from control.core.placement import (
    ClusterSnapshot,
    Demand,
    DeviceEntry,
    ModelEntry,
    PlacementPlan,
    demand_from_workflows,
    mean_service_s,
    plan_with,
)
from sim.driver import Arrival
from sim.report import Report
from sim.scenario import PlacedReplica, Scenario
from sim.whatif import run_scenario
from sim.workload import arrivals


@dataclass(frozen=True)
class PlannedLayout:
    """A policy's plan and the same plan as scenario placement rows."""

    plan: PlacementPlan
    placement: tuple[PlacedReplica, ...]


def peak_rates(reqs: list[Arrival], window_s: float) -> dict[str, float]:
    """Per workflow, the highest request rate over any ``window_s`` window starting at an
    arrival (the whole span when it is shorter): traces are bursty, and replicas sized for the
    mean rate queue for the length of every burst."""
    by_wf: dict[str, list[float]] = {}
    for a in reqs:
        by_wf.setdefault(a.request.workflow, []).append(a.at)
    out = {}
    for wf, times in by_wf.items():
        span = max(times[-1] - times[0], 1e-9)
        width = min(window_s, span)
        j, best = 0, 0
        for i, t in enumerate(times):
            while j < len(times) and times[j] < t + width:
                j += 1
            best = max(best, j - i)
        out[wf] = best / width
    return out


def scenario_demand(
    scenario: Scenario, seed: int | None = None, batch: int = 4, window_s: float = 30.0
) -> Demand:
    """Demand of the scenario's workload (see the module docstring); rates are the peak
    ``window_s`` rates of :func:`peak_rates`."""
    reqs = arrivals(scenario, scenario.seeds[0] if seed is None else seed)
    if not reqs:
        return Demand()
    rates = peak_rates(reqs, window_s)
    prompt = round(sum(a.request.prompt_tokens for a in reqs) / len(reqs))
    out = round(sum(a.request.max_output_tokens for a in reqs) / len(reqs))
    latency = scenario.latency.model()
    acc = scenario.devices[0].accelerator
    service: dict[str, float] = {}
    for spec in scenario.workflows:
        for n in spec.nodes:
            if n.model is None:
                continue
            tokens = int(n.params.get("input_tokens", prompt))
            gen = out if n.task == "generate" else 0
            service[n.model] = mean_service_s(latency, n.model, acc, batch, tokens, gen)
    return demand_from_workflows(scenario.workflows, rates, service)


def snapshot_of(scenario: Scenario) -> ClusterSnapshot:
    """The scenario's fleet as placement sees it (models in registration order)."""
    return ClusterSnapshot(
        tuple(DeviceEntry(d) for d in scenario.devices),
        tuple(ModelEntry(m) for m in scenario.models),
        scenario.tenancy.headroom,
    )


def plan_placement(
    scenario: Scenario, policy: str, config: object | None = None, demand: Demand | None = None
) -> PlannedLayout:
    """Plan with the registered ``policy``; raises the core's PlanError on a bad config."""
    plan = plan_with(policy, snapshot_of(scenario), demand or scenario_demand(scenario), config)
    rows = tuple(
        PlacedReplica(p.model_key, p.device_ids, p.replicas, p.pool) for p in plan.placements
    )
    return PlannedLayout(plan, rows)


@dataclass(frozen=True)
class Capacity:
    """The highest offered load a layout sustains under an SLO rule (see :func:`capacity`).

    ``rate_factor`` scales the scenario's trace; ``report`` is the twin's report there (its
    ``all.throughput_rps`` is the served rate); ``bracketed`` is False when the search hit its
    bounds (the layout meets the rule even at ``hi`` or misses it even at ``lo``)."""

    rate_factor: float
    report: Report | None
    bracketed: bool
    probes: int


def within_slo(report: Report, slo_p99_s: float) -> bool:
    """The capacity rule: every request served (none rejected, none unfinished) and the
    end-to-end p99 within ``slo_p99_s``."""
    p99 = report.get("all.e2e_p99_s")
    lost = (report.get("all.rejected") or 0.0) + (report.get("all.unfinished") or 0.0)
    return p99 is not None and p99 <= slo_p99_s and lost == 0


def search_rate(
    meets: Callable[[float], Report | None], start: float, lo: float, hi: float, steps: int = 6
) -> Capacity:
    """Largest rate factor in [lo, hi] for which ``meets`` returns a report (None: the rule is
    missed), assuming the rule holds below some threshold and fails above it. Doubles or
    halves from ``start`` to bracket the threshold, then bisects ``steps`` times on a log scale
    (6 steps: within 1.1 %). Calls ``meets`` once per probe; changes nothing."""
    probes, best, best_rf = 0, None, 0.0

    def probe(rf: float) -> bool:
        nonlocal probes, best, best_rf
        probes += 1
        rep = meets(rf)
        if rep is not None and rf > best_rf:
            best, best_rf = rep, rf
        return rep is not None

    good, bad = (start, None) if probe(start) else (None, start)
    while good is None and bad / 2 >= lo:
        good, bad = (bad / 2, None) if probe(bad / 2) else (None, bad / 2)
    while bad is None and good * 2 <= hi:
        good, bad = (good * 2, None) if probe(good * 2) else (good, good * 2)
    if good is None or bad is None:
        return Capacity(best_rf, best, False, probes)
    for _ in range(steps):
        mid = math.sqrt(good * bad)
        good, bad = (mid, bad) if probe(mid) else (good, mid)
    return Capacity(best_rf, best, True, probes)


def capacity(
    scenario: Scenario, placement: Iterable[PlacedReplica], slo_p99_s: float, steps: int = 6
) -> Capacity:
    """The sustained capacity of ``placement`` on ``scenario``: the highest ``rate_factor`` (the
    trace's arrival rate scaled, same requests and seeds) whose twin report meets
    :func:`within_slo`. The same rule for every layout makes capacities comparable."""
    rows = tuple(placement)

    def meets(rf: float) -> Report | None:
        wl = replace(scenario.workload, rate_factor=rf)
        rep = run_scenario(replace(scenario, workload=wl), placement=rows)
        return rep if within_slo(rep, slo_p99_s) else None

    start = scenario.workload.rate_factor
    return search_rate(meets, start, start / 64, start * 64, steps)
