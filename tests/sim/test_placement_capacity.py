"""Capacity of a layout in the twin: the search for the highest trace rate that meets the SLO
rule (fake rule functions), the rule itself, and one small run on the shipped RAG scenario."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim.placement import capacity, plan_placement, search_rate, within_slo
from sim.scenario_io import read_scenario_dict, scenario_from_dict

STEP = 2 ** (1 / 64)  # precision of 6 bisections of a factor-2 bracket on a log scale


def threshold_rule(limit: float, calls: list[float] | None = None):
    """A fake twin: the rule holds up to ``limit``; the 'report' is the rate itself."""

    def meets(rf: float):
        if calls is not None:
            calls.append(rf)
        return SimpleNamespace(rf=rf) if rf <= limit else None

    return meets


@pytest.mark.parametrize(
    ("limit", "start"),
    [(1.0, 0.5), (0.13, 0.5), (7.3, 0.5), (0.5, 0.5), (0.01, 0.5), (20.0, 0.5)],
)
def test_search_finds_the_threshold_from_below(limit, start):
    cap = search_rate(threshold_rule(limit), start, start / 64, start * 64)
    assert cap.bracketed
    assert limit / STEP - 1e-12 <= cap.rate_factor <= limit
    assert cap.report.rf == cap.rate_factor  # the report of the best passing probe


@pytest.mark.parametrize(
    ("limit", "found"),
    [(100.0, 32.0), (0.001, 0.0)],  # passes at hi / misses even at lo
)
def test_search_reports_an_unbracketed_threshold(limit, found):
    cap = search_rate(threshold_rule(limit), 0.5, 0.5 / 64, 0.5 * 64)
    assert not cap.bracketed
    assert cap.rate_factor == found
    assert (cap.report is None) == (found == 0.0)


@settings(max_examples=60, deadline=None)
@given(
    limit=st.floats(min_value=0.02, max_value=15.0),
    start=st.floats(min_value=0.3, max_value=3.0),
    steps=st.integers(min_value=0, max_value=8),
)
def test_search_never_overshoots_and_bisects_to_precision(limit, start, steps):
    assume(limit >= start / 64)  # inside the search range [start / 64, start * 64]
    calls: list[float] = []
    cap = search_rate(threshold_rule(limit, calls), start, start / 64, start * 64, steps)
    assert cap.bracketed
    assert cap.rate_factor <= limit
    assert cap.rate_factor >= limit / 2 ** (1 / 2**steps) - 1e-9
    assert cap.probes == len(calls) <= 8 + steps


class FakeReport:
    def __init__(self, **values: float) -> None:
        self.values = {f"all.{k}": v for k, v in values.items()}

    def get(self, key: str) -> float | None:
        return self.values.get(key)


@pytest.mark.parametrize(
    ("values", "ok"),
    [
        ({"e2e_p99_s": 9.9, "rejected": 0, "unfinished": 0}, True),
        ({"e2e_p99_s": 10.0, "rejected": 0, "unfinished": 0}, True),
        ({"e2e_p99_s": 10.1, "rejected": 0, "unfinished": 0}, False),
        ({"e2e_p99_s": 2.0, "rejected": 0.34, "unfinished": 0}, False),
        ({"e2e_p99_s": 2.0, "rejected": 0, "unfinished": 1}, False),
        ({"rejected": 0, "unfinished": 0}, False),  # nothing served
    ],
)
def test_within_slo_rule(values, ok):
    assert within_slo(FakeReport(**values), 10.0) is ok


def test_planner_layout_sustains_more_than_naive_on_the_rag_scenario():
    raw = read_scenario_dict("rag_enterprise")
    raw.pop("variants", None)
    sc = scenario_from_dict(raw)
    sc = replace(sc, seeds=(0,))  # the whole shipped slice: its big burst decides
    caps = {
        name: capacity(sc, plan_placement(sc, name).placement, 10.0, steps=1)
        for name in ("planner", "naive")
    }
    assert all(c.bracketed for c in caps.values())
    planner, naive = caps["planner"], caps["naive"]
    assert planner.rate_factor > naive.rate_factor
    served = planner.report.get("all.throughput_rps")
    assert math.isfinite(served) and served > naive.report.get("all.throughput_rps")
