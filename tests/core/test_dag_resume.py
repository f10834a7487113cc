"""Replaying a resumed run's completed steps: they are done without running, routes and map
chunk counts follow what they recorded, and only the rest is handed out to run."""

from __future__ import annotations

from control.core.dag.resume import replay
from control.core.types import DoneStep
from tests.core.test_dag_run import MAP, ROUTED, run_of


def test_done_steps_are_not_handed_out_again() -> None:
    run = run_of(ROUTED)
    left = replay(run, [DoneStep("route", None, "long"), DoneStep("embed")])
    to_run = left + run.take_ready()  # what the core queues (taken in replay, or ready)
    assert [s.node_id for s in to_run] == ["search"]  # route, embed done; fast branch dead
    assert run.state["fast"] == "skipped" and run.state["embed"] == "done"
    assert to_run[0].attempt == 1 and to_run[0].idempotency_key == "idem/search"


def test_map_chunks_done_before_the_restart_are_kept() -> None:
    run = run_of(MAP)
    left = replay(run, [DoneStep("split", None, None, 3), DoneStep("sum", 1)])
    assert sorted(s.chunk for s in left) == [0, 2]  # chunk 1 was done
    assert run.take_ready() == []
    for s in left:
        run.on_step_done(s.key, "cpu:0", None)
    assert run.status == "succeeded"


def test_a_run_done_before_the_restart_ends_at_once() -> None:
    run = run_of(MAP)
    done = [DoneStep("split", None, None, 2), DoneStep("sum", 0), DoneStep("sum", 1)]
    assert replay(run, done) == [] and run.status == "succeeded"


def test_nothing_done_leaves_a_fresh_run() -> None:
    run = run_of(ROUTED)
    assert replay(run, []) == [] and [s.node_id for s in run.take_ready()] == ["route"]
