"""The hand-moved clock tests give to components instead of patching modules."""

from __future__ import annotations

import pytest

from control.clock import SYSTEM_CLOCK, Clock
from tests.support.clock import ManualClock


def test_readings_move_only_when_advanced() -> None:
    clock: Clock = ManualClock(start_s=10.0, wall_s=100.0)
    assert (clock.monotonic(), clock.perf_counter(), clock.wall_time()) == (10.0, 10.0, 100.0)
    clock.advance(2.5)  # type: ignore[attr-defined]
    assert (clock.monotonic(), clock.wall_time()) == (12.5, 102.5)
    assert clock.utcnow().timestamp() == 102.5


def test_it_cannot_go_back() -> None:
    with pytest.raises(ValueError, match="cannot go back"):
        ManualClock().advance(-1.0)


def test_the_system_clock_reads_the_machine() -> None:
    first = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= first
    assert SYSTEM_CLOCK.utcnow().tzinfo is not None
    assert abs(SYSTEM_CLOCK.wall_time() - SYSTEM_CLOCK.utcnow().timestamp()) < 1.0
