"""The one module that reads the wall clock.

Everything else receives time as an argument (the core) or asks this module (drivers, the
executor's timers, benchmarks). Keeping the reads here makes the rule checkable: a ruff
banned-API rule refuses ``time.time``/``time.monotonic``/``time.perf_counter``/``datetime.now``
anywhere else (see ``tests/architecture``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime


def monotonic() -> float:
    """Seconds on a monotonic clock: for durations and the live driver's ``now``."""
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
