"""The twin driver's loop: one core step per instant, after every input of that instant.

A fake core records the calls it gets, so the order the driver promises (ARCHITECTURE.md
section 1: record everything due at an instant, step once, carry out, re-arm the wake-up) is
checked call by call. Also: ``prepare_seed`` + ``replay`` is ``run_seed``, and ``tuned_gc``
puts the collector back as it found it.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

import pytest

from control.core.actions import BatchItem, Dispatch, StepPlan
from control.core.types import BatchResult, Request
from sim.driver import Arrival, TwinDriver
from sim.env import tuned_gc
from sim.runner import prepare_seed, run_seed
from sim.scenario_io import read_scenario_dict, scenario_from_dict


@dataclass
class FakeCore:
    """Dispatches one host batch of ``duration_us`` per submitted request at each step and
    asks to be woken at the times in ``wakeups``."""

    duration_us: int = 0
    wakeups: list[float] = field(default_factory=list)
    calls: list[tuple] = field(default_factory=list)
    _new: list[str] = field(default_factory=list)
    _n: int = 0

    def submit(self, req: Request, now: float) -> None:
        self.calls.append(("submit", req.request_id, now))
        self._new.append(req.request_id)

    def complete(self, result: BatchResult, now: float) -> None:
        self.calls.append(("complete", result.batch_id, now))

    def step(self, now: float) -> StepPlan:
        self.calls.append(("step", now))
        actions = []
        for rid in self._new:
            self._n += 1
            item = BatchItem(f"{rid}/n/1", rid, "n", 1, None, rid, "tool", (), 1, 0)
            actions.append(Dispatch(f"b{self._n}", None, None, "search", (), (item,), 1, 0, "go"))
        self._new = []
        return StepPlan(now, tuple(actions), {})

    def next_wakeup(self, now: float) -> float | None:
        later = [t for t in self.wakeups if t > now]
        return min(later) if later else None


@dataclass
class FakeExecutor:
    duration_us: int
    devices: dict = field(default_factory=dict)

    def run(self, d: Dispatch):  # noqa: ANN201
        @dataclass
        class Done:
            result: BatchResult
            duration_us: int

        return Done(BatchResult(d.batch_id, self.duration_us, ()), self.duration_us)


def _drive(arrival_times, duration_us=0, wakeups=(), **run):  # noqa: ANN001, ANN003, ANN202
    core = FakeCore(duration_us, list(wakeups))
    driver = TwinDriver(core, FakeExecutor(duration_us))  # type: ignore[arg-type]
    reqs = [Arrival(t, Request(f"q{i}", "t", "w")) for i, t in enumerate(arrival_times)]
    driver.run(reqs, **run)
    return core.calls, driver


@pytest.mark.parametrize(
    ("times", "expected_steps"),
    [
        ([1.0], [1.0]),
        ([1.0, 1.0, 1.0], [1.0]),  # three inputs of one instant: one step after all of them
        ([1.0, 2.0, 2.0], [1.0, 2.0]),
        ([0.5, 0.25], [0.25, 0.5]),
    ],
)
def test_one_step_per_instant_after_every_input_of_it(times, expected_steps) -> None:
    calls, driver = _drive(times, duration_us=1_000_000)
    steps = [c[1] for c in calls if c[0] == "step"]
    # each batch completes 1 s after its step: that instant gets its own step too
    assert steps == sorted(set(expected_steps) | {t + 1.0 for t in expected_steps})
    for i, c in enumerate(calls):
        if c[0] == "submit":  # the step of its instant comes later, with no step in between
            rest = calls[i + 1 :]
            first_step = next(x for x in rest if x[0] == "step")
            assert first_step[1] == c[2]
    assert driver.steps == len(steps)
    assert driver.events == len(times) + len(steps) + len(times)  # inputs + steps + completions


def test_an_input_created_by_a_step_at_the_same_instant_gets_its_own_step() -> None:
    calls, _ = _drive([1.0], duration_us=0)  # the batch completes at the instant it started
    assert calls == [("submit", "q0", 1.0), ("step", 1.0), ("complete", "b1", 1.0), ("step", 1.0)]


def test_wakeups_fire_at_the_exact_time_asked_for() -> None:
    calls, _ = _drive([1.0], duration_us=1_000_000, wakeups=[1.3, 7.25])
    assert [c[1] for c in calls if c[0] == "step"] == [1.0, 1.3, 2.0, 7.25]


def test_observer_sampling_at_an_instant_runs_after_its_step() -> None:
    core = FakeCore()
    driver = TwinDriver(core, FakeExecutor(0))  # type: ignore[arg-type]
    driver.env.observe_at(2.0, lambda _now: core.calls.append(("observe", 2.0)))
    driver.run([Arrival(2.0, Request("q0", "t", "w"))])
    assert core.calls.index(("observe", 2.0)) > core.calls.index(("step", 2.0))


def test_the_replay_stops_right_after_the_step_that_reaches_max_steps() -> None:
    calls, driver = _drive([1.0, 2.0], duration_us=0, max_steps=1)
    assert calls == [("submit", "q0", 1.0), ("step", 1.0)]  # not the completion due at 1.0
    assert driver.steps == 1


def test_what_is_due_at_until_still_runs_and_nothing_later() -> None:
    calls, driver = _drive([1.0, 2.0, 3.0], duration_us=1_000_000, until=2.0)
    assert [c for c in calls if c[0] == "step"] == [("step", 1.0), ("step", 2.0)]
    assert ("complete", "b1", 2.0) in calls and ("submit", "q2", 3.0) not in calls
    assert driver.env.now == 2.0


def test_a_failed_simpy_event_raises_from_the_replay() -> None:
    core = FakeCore()
    driver = TwinDriver(core, FakeExecutor(0))  # type: ignore[arg-type]
    driver.env.event().fail(RuntimeError("a process broke"))
    with pytest.raises(RuntimeError, match="a process broke"):
        driver.run([Arrival(1.0, Request("q0", "t", "w"))])
    assert core.calls == []  # it was due at 0, before the arrival


def _small_rag() -> dict:
    raw = read_scenario_dict("rag_enterprise")
    raw.pop("variants", None)
    raw["workload"]["max_requests"] = 60
    return raw


def test_prepare_then_replay_is_run_seed() -> None:
    sc = scenario_from_dict(_small_rag())
    a = run_seed(sc, 3, keep_log=True, samples=5)
    b = prepare_seed(sc, 3, keep_log=True, samples=5).replay()
    assert a.driver.log == b.driver.log and len(a.driver.log) > 60
    assert a.num_requests == b.num_requests == 60
    assert a.recorder.queue_depth == b.recorder.queue_depth


def test_tuned_gc_restores_the_collector() -> None:
    before = gc.get_threshold()
    with tuned_gc(12_345):
        assert gc.get_threshold()[0] == 12_345
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
