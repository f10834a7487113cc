"""The live runtime reads time only from the clock it was given, and hands it to its driver and
actuator: a run's submission, the driver's ``now`` and a run's end are all on that clock.

With a clock far ahead of the machine's, a reading taken anywhere from the system clock
instead would show as a wall time of about ``OFFSET_S`` (or a wake-up that never comes); with
a clock moved by hand, a run's wall time is exactly what the test moved it by.
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from control.clock import SYSTEM_CLOCK
from control.core.actions import RunFinished
from control.core.tenancy.cost import CostModel
from control.core.types import Request
from control.runtime.actuator import Actuator
from control.runtime.completions import Completions
from control.runtime.state import RunState
from control.runtime.types import RunHandle
from tests.runtime.conftest import make_runtime, run_request
from tests.support.clock import ManualClock

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: How far ahead of the machine's monotonic clock the live runtime's clock runs.
OFFSET_S = 1_000_000.0


class AheadClock:
    """The system's clocks, the monotonic and performance ones ``OFFSET_S`` ahead."""

    def monotonic(self) -> float:
        return SYSTEM_CLOCK.monotonic() + OFFSET_S

    def perf_counter(self) -> float:
        return SYSTEM_CLOCK.perf_counter() + OFFSET_S

    def wall_time(self) -> float:
        return SYSTEM_CLOCK.wall_time()

    def utcnow(self):  # noqa: ANN201
        return SYSTEM_CLOCK.utcnow()


class _Metrics:
    def __init__(self) -> None:
        self.runs: list[tuple[str, str, float]] = []

    def run_done(self, workflow: str, status: str, wall_s: float) -> None:
        self.runs.append((workflow, status, wall_s))


class _Executor:
    def release_run(self, run_id: str) -> None:
        pass


async def test_a_runs_wall_time_is_measured_on_the_actuators_clock() -> None:
    clock = ManualClock()
    handle = RunHandle("r1", asyncio.get_running_loop())
    runs = {"r1": RunState(handle, Request("r1", "t1", "wf:1"), {}, {}, clock.monotonic())}
    metrics = _Metrics()
    done = Completions(runs, CostModel(), metrics, None, lambda d: None, lambda d: [])  # type: ignore[arg-type]
    act = Actuator(_Executor(), done, runs, {}, {}, metrics, lambda r: None, clock=clock)  # type: ignore[arg-type]
    clock.advance(1.25)
    act.apply([RunFinished("r1", "failed", {}, "a step failed", "failed")], clock.monotonic())
    result = await asyncio.wait_for(handle.result(), 1)
    assert result.status == "failed" and result.error == "a step failed"
    assert metrics.runs == [("wf:1", "failed", 1.25)]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def ahead(model_cache):
    rt = make_runtime(model_cache, clock=AheadClock())
    await rt.start()
    yield rt
    await rt.stop()


async def test_the_live_runtime_runs_on_the_clock_it_was_given(ahead) -> None:
    rt = ahead
    assert rt.snapshot().now >= OFFSET_S  # the core was built and is stepped on that clock
    handle = rt.submit_run(run_request("embed-only", text="a"))  # dispatched by a wake-up
    assert rt.runs[handle.request_id].submitted_at >= OFFSET_S
    result = await asyncio.wait_for(handle.result(), 10)
    assert result.status == "succeeded", result
    await asyncio.sleep(0.05)  # the run's latency is recorded after its caller is answered
    labels = {"workflow": "embed-only", "status": "succeeded"}
    wall_s = rt.metrics.registry.get_sample_value("legato_run_latency_seconds_sum", labels)
    assert wall_s is not None and 0.0 < wall_s < 10.0, wall_s
