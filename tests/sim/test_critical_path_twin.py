"""Critical-path step order in the twin (issue 26, item 4): a scenario's ``core:`` section sets
it (a bad value is refused naming the field), it lowers p99 on the agent-shaped ``fork``
workflow under bursts, and on the shipped agent workflow it is never worse than today's order."""

from __future__ import annotations

from pathlib import Path

import pytest

from control.services.loadgen import percentile
from sim.runner import run_seed
from sim.scenario import Scenario
from sim.scenario_io import ScenarioError, load_scenario
from tests.support.critical_path_twin import fork_scenario, with_order

AGENT = Path(__file__).resolve().parents[2] / "sim" / "scenarios" / "agent_dag.yaml"


def p99(scenario: Scenario) -> tuple[float, int, int]:
    """(p99 end-to-end seconds of succeeded runs, succeeded, submitted) over the seeds."""
    done, sent = [], 0
    for seed in scenario.seeds:
        records = run_seed(scenario, seed, samples=0).recorder.requests.values()
        sent += len(records)
        done += [r.end - r.arrival for r in records if r.status == "succeeded" and r.end]
    return percentile(done, 0.99) or 0.0, len(done), sent


def test_the_scenario_core_section_sets_the_step_order() -> None:
    assert fork_scenario("critical_path").core_config.step_order == "critical_path"
    assert fork_scenario().core_config.step_order == "arrival"


def test_a_bad_step_order_in_a_scenario_is_refused_naming_it() -> None:
    with pytest.raises(ScenarioError, match="step_order"):
        fork_scenario("deepest")


def test_critical_path_lowers_p99_on_the_fork_workflow_under_bursts() -> None:
    today, ok_today, sent = p99(fork_scenario("arrival"))
    critical, ok_critical, _ = p99(fork_scenario("critical_path"))
    assert ok_today == ok_critical == sent > 300
    assert critical * 1.08 < today  # measured 2.26 s against 2.63 s


def test_critical_path_is_no_worse_on_the_shipped_agent_workflow() -> None:
    shipped = load_scenario(AGENT)
    today, ok_today, _ = p99(with_order(shipped, "arrival"))
    critical, ok_critical, _ = p99(with_order(shipped, "critical_path"))
    assert ok_critical == ok_today
    assert critical <= today * 1.01
