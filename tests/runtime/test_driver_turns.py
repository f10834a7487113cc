"""The live driver's turns: every record queued before a turn is recorded at one ``now`` and
stepped once; a failed turn does not stop the driver; ``stop`` ends ``run`` after what was
queued before it. The core and actuator are small fakes: only the driver's loop is under test."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from control.runtime.driver import Driver
from control.runtime.state import Submit, Wake
from tests.support.clock import ManualClock


@dataclass
class _Plan:
    actions: tuple = ()


@dataclass
class _Core:
    submitted: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    fail_next_step: bool = False

    def submit(self, request, now: float) -> None:  # noqa: ANN001
        self.submitted.append((request, now))

    def step(self, now: float) -> _Plan:
        self.steps.append((now, [r for r, _ in self.submitted]))
        if self.fail_next_step:
            self.fail_next_step = False
            raise RuntimeError("a core bug")
        return _Plan()

    def next_wakeup(self, now: float) -> None:
        return None

    def gauges(self) -> None:
        return None


class _Actuator:
    def __init__(self) -> None:
        self.applied: list = []
        self.on_apply = None

    def apply(self, actions, now: float) -> None:  # noqa: ANN001
        self.applied.append(now)
        if self.on_apply is not None:
            self.on_apply()


class _Metrics:
    def sample(self, gauges, now: float) -> None:  # noqa: ANN001
        pass


def _driver(clock: ManualClock | None = None) -> tuple[Driver, _Core, _Actuator]:
    core, actuator = _Core(), _Actuator()
    options = {} if clock is None else {"clock": clock}
    driver = Driver(core, actuator, None, _Metrics(), lambda *_: None, **options)  # type: ignore[arg-type]
    return driver, core, actuator


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_records_of_one_instant_share_one_step_and_one_now() -> None:
    driver, core, _ = _driver()
    driver.put(Submit("before-run"))  # type: ignore[arg-type]  # waits for run
    task = asyncio.create_task(driver.run())
    await _settle()
    driver.put(Submit("a"))  # type: ignore[arg-type]
    driver.put(Submit("b"))  # type: ignore[arg-type]
    await _settle()
    assert [names for _, names in core.steps] == [["before-run"], ["before-run", "a", "b"]]
    nows = {now for req, now in core.submitted if req in ("a", "b")}
    assert len(nows) == 1 and nows == {core.steps[1][0]}
    driver.stop()
    await asyncio.wait_for(task, 1)
    assert driver.steps == len(core.steps) == 3  # the stop's own instant steps too


async def test_a_record_put_during_a_turn_gets_the_next_turn() -> None:
    driver, core, actuator = _driver()
    task = asyncio.create_task(driver.run())
    actuator.on_apply = lambda: (
        driver.put(Submit("follow-up")) if len(actuator.applied) == 1 else None  # type: ignore[arg-type]
    )
    driver.put(Submit("first"))  # type: ignore[arg-type]
    await _settle()
    assert [names for _, names in core.steps] == [["first"], ["first", "follow-up"]]
    driver.stop()
    await asyncio.wait_for(task, 1)


async def test_a_failed_turn_is_logged_and_the_driver_goes_on(caplog) -> None:  # noqa: ANN001
    driver, core, actuator = _driver()
    task = asyncio.create_task(driver.run())
    core.fail_next_step = True
    driver.put(Submit("x"))  # type: ignore[arg-type]
    await _settle()
    assert "turn" in caplog.text and actuator.applied == []
    driver.put(Wake())
    await _settle()
    assert len(core.steps) == 2 and len(actuator.applied) == 1
    driver.stop()
    await asyncio.wait_for(task, 1)


async def test_stop_ends_run_after_the_records_before_it_even_when_that_turn_fails() -> None:
    driver, core, _ = _driver()
    task = asyncio.create_task(driver.run())
    core.fail_next_step = True
    driver.put(Submit("last"))  # type: ignore[arg-type]
    driver.stop()
    await asyncio.wait_for(task, 1)
    assert [names for _, names in core.steps] == [["last"]]


async def test_turn_now_takes_the_scheduled_turn_at_once_and_only_once() -> None:
    driver, core, _ = _driver()
    task = asyncio.create_task(driver.run())
    await _settle()
    driver.turn_now()  # nothing scheduled: no turn
    assert core.steps == []
    driver.put(Submit("read"))  # type: ignore[arg-type]
    driver.turn_now()  # e.g. the executor has read its pipes: no loop iteration in between
    assert [names for _, names in core.steps] == [["read"]]
    await _settle()
    assert len(core.steps) == 1  # the turn scheduled for the next iteration was taken
    driver.stop()
    await asyncio.wait_for(task, 1)


async def test_after_turn_hooks_run_at_the_end_of_every_turn_even_a_failed_one(caplog) -> None:  # noqa: ANN001
    driver, core, actuator = _driver()
    seen: list[int] = []
    driver.after_turn.append(lambda: seen.append(len(actuator.applied)))
    driver.after_turn.append(lambda: 1 / 0)  # a broken hook is logged, the turns go on
    task = asyncio.create_task(driver.run())
    core.fail_next_step = True
    driver.put(Submit("x"))  # type: ignore[arg-type]
    await _settle()
    driver.put(Submit("y"))  # type: ignore[arg-type]
    await _settle()
    assert seen == [0, 1] and "after-turn hook" in caplog.text
    driver.stop()
    await asyncio.wait_for(task, 1)


async def test_later_runs_after_the_callers_the_turn_answered_took_their_step() -> None:
    driver, _, actuator = _driver()
    order: list[str] = []
    answered = asyncio.get_running_loop().create_future()

    async def caller() -> None:
        await answered
        order.append("caller answered")

    waiting = asyncio.create_task(caller())
    actuator.on_apply = lambda: driver.later(order.append, "metrics")
    driver.after_turn.append(lambda: answered.done() or answered.set_result(None))
    task = asyncio.create_task(driver.run())
    await _settle()
    driver.put(Submit("x"))  # type: ignore[arg-type]
    await _settle()
    assert order[:2] == ["caller answered", "metrics"]
    driver.later(order.append, "outside a turn")  # the next iteration
    await _settle()
    assert order[-1] == "outside a turn"
    driver.stop()
    await asyncio.wait_for(task, 1)
    await waiting


async def test_each_turns_now_is_read_from_the_clock_the_driver_was_given() -> None:
    clock = ManualClock(start_s=50.0)
    driver, core, actuator = _driver(clock)
    task = asyncio.create_task(driver.run())
    driver.put(Submit("a"))  # type: ignore[arg-type]
    await _settle()
    clock.advance(2.5)
    driver.put(Submit("b"))  # type: ignore[arg-type]
    await _settle()
    assert [now for now, _ in core.steps] == actuator.applied == [50.0, 52.5]
    assert [now for _, now in core.submitted] == [50.0, 52.5]
    driver.stop()
    await asyncio.wait_for(task, 1)
