"""Replays of equal latency tables share one latency model (a pure cache), and decide the same."""

from __future__ import annotations

from control.core.latency import LatencyRow
from sim import runner
from sim.runner import LATENCY_MODELS_KEPT, latency_model, run_seed
from sim.scenario import LatencyTables
from sim.scenario_io import read_scenario_dict, scenario_from_dict


def _tables(us: int) -> LatencyTables:
    return LatencyTables(
        (LatencyRow("m:1", "gpu", 1, 64, us), LatencyRow("m:1", "gpu", 8, 64, 2 * us))
    )


def test_equal_tables_share_a_model_and_different_ones_do_not() -> None:
    a, b = latency_model(_tables(1000)), latency_model(_tables(1000))
    assert a is b
    other = latency_model(_tables(1500))
    assert other is not a
    assert (
        other.forward_us("m:1", "gpu", 1, 64) == 1500 and a.forward_us("m:1", "gpu", 1, 64) == 1000
    )


def test_the_shared_models_are_bounded() -> None:
    for i in range(LATENCY_MODELS_KEPT + 3):
        latency_model(_tables(2000 + i))
    assert len(runner._LATENCY_MODELS) == LATENCY_MODELS_KEPT


def test_a_replay_with_a_warm_shared_model_decides_as_a_cold_one() -> None:
    raw = read_scenario_dict("rag_enterprise")
    raw["workload"]["max_requests"] = 80
    sc = scenario_from_dict(raw)
    runner._LATENCY_MODELS.clear()
    cold = run_seed(sc, 1, keep_log=True, samples=0)
    warm = run_seed(sc, 1, keep_log=True, samples=0)  # the same model, its memo filled
    assert warm.driver.core is not cold.driver.core
    assert warm.driver.log == cold.driver.log and len(cold.driver.log) > 80
