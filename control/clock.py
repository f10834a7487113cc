"""The one module that reads the wall clock: a neutral leaf every layer may import.

Everything else receives time as an argument (the core), from a :class:`Clock` it was given
(the live driver, the executor, the inference service: the places that read time on a hot path),
or from this module's functions (start-up, benchmarks, timestamps of rare writes). Keeping the
reads here makes the rule checkable: a ruff banned-API rule refuses ``time.time`` /
``time.monotonic`` / ``time.perf_counter`` / ``datetime.now`` anywhere else, and the decision
core may not import this module at all (``tests/architecture``).

A :class:`Clock` is what a component that reads time is given, so that a test can hand it a
clock it moves by hand (``tests/support/clock.py``) instead of patching modules.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    """The time sources a live component reads. Implementations must be thread-safe to read."""

    def monotonic(self) -> float:
        """Seconds on a monotonic clock: durations, deadlines, the live driver's ``now``."""
        ...

    def perf_counter(self) -> float:
        """High-resolution seconds for measuring short durations (model latency, hops)."""
        ...

    def wall_time(self) -> float:
        """Seconds since the epoch: timestamps stored in the database."""
        ...

    def utcnow(self) -> datetime:
        """Timezone-aware current UTC time: audit records and row timestamps."""
        ...


class SystemClock:
    """The machine's clocks (the :class:`Clock` every product component gets by default)."""

    __slots__ = ()

    def monotonic(self) -> float:
        return time.monotonic()

    def perf_counter(self) -> float:
        return time.perf_counter()

    def wall_time(self) -> float:
        return time.time()

    def utcnow(self) -> datetime:
        return datetime.now(UTC)


#: The one system clock; components default to it.
SYSTEM_CLOCK: Clock = SystemClock()


def monotonic() -> float:
    """Seconds on a monotonic clock: for durations and deadlines."""
    return time.monotonic()


def perf_counter() -> float:
    """High-resolution seconds for measuring short durations (model latency, hop overhead)."""
    return time.perf_counter()


def wall_time() -> float:
    """Seconds since the epoch: for timestamps stored in the database."""
    return time.time()


def utcnow() -> datetime:
    """Timezone-aware current UTC time: for audit records and row timestamps."""
    return datetime.now(UTC)


def process_time() -> float:
    """CPU seconds this process has used: for benchmarks on a shared machine, where wall time
    also counts the time other processes held the CPU."""
    return time.process_time()
