"""Demand from workflows: neighbour pairs through tools, rates x workflows, service times."""

from __future__ import annotations

import pytest

from control.core.dag.spec import dag_from_dict
from control.core.latency import DecodeRow, LatencyRow, TableLatencyModel
from control.core.placement import (
    Demand,
    ModelDemand,
    PlanError,
    demand_from_workflows,
    mean_service_s,
)
from control.core.placement.demand import model_neighbours
from tests.support.builders import RAG


def test_rag_neighbours_look_through_the_search_tool():
    assert model_neighbours(dag_from_dict(RAG)) == {
        ("minilm:1", "rerank:1"),
        ("rerank:1", "smollm2:1"),
    }


def test_demand_from_workflows_sums_rates_over_workflows():
    rag = dag_from_dict(RAG)
    other = dag_from_dict({**RAG, "workflow": "rag2"})
    d = demand_from_workflows([rag, other], {"rag": 3.0, "rag2": 2.0}, {"minilm:1": 0.01})
    assert d.of("minilm:1") == ModelDemand(5.0, 0.01)
    assert d.of("smollm2:1").arrival_rate == 5.0 and d.of("smollm2:1").service_s == 0.0
    assert d.traffic[("minilm:1", "rerank:1")] == 5.0
    assert ("minilm:1", "smollm2:1") not in d.traffic


def test_traffic_pairs_are_unordered_and_summed():
    d = Demand({}, {("b", "a"): 2.0, ("a", "b"): 1.5})
    assert dict(d.traffic) == {("a", "b"): 3.5}
    assert d.neighbours() == {"a": {"b": 3.5}, "b": {"a": 3.5}}


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: Demand({}, {("a", "a"): 1.0}), "own neighbour"),
        (lambda: Demand({}, {("a", "b"): -1.0}), "traffic"),
        (lambda: ModelDemand(-1.0, 0.1), "arrival_rate"),
        (lambda: ModelDemand(1.0, float("nan")), "service_s"),
    ],
)
def test_bad_demand_raises_naming_the_field(build, match):  # noqa: ANN001
    with pytest.raises(PlanError, match=match):
        build()


def test_mean_service_is_batch_time_over_batch_size():
    lat = TableLatencyModel(
        [LatencyRow("m", "cpu", 1, 64, 10_000), LatencyRow("m", "cpu", 8, 64, 40_000)],
        [DecodeRow("m", "cpu", 1_000, 500)],
    )
    assert mean_service_s(lat, "m", "cpu", 8, 64) == pytest.approx(0.005)
    # decode: 10 tokens x (1000 + 500 x 8) us = 50 ms per batch of 8
    assert mean_service_s(lat, "m", "cpu", 8, 64, 10) == pytest.approx((0.040 + 0.050) / 8)
