"""A :class:`control.clock.Clock` that a test moves by hand.

Give it to a component instead of patching ``control.clock``: every reading returns the time
the test set, so a deadline, a timeout or a measured duration is exactly what the test made it.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

#: 2026-12-01T00:00:00Z, an arbitrary fixed epoch for wall-clock readings.
EPOCH_S = 1_796_083_200.0


class ManualClock:
    """Monotonic, performance and wall readings that move only by :meth:`advance`.

    ``monotonic`` and ``perf_counter`` start at ``start_s``; ``wall_time`` at ``wall_s``; all
    advance together. Thread-safe (the executor reads it from its reader thread)."""

    def __init__(self, start_s: float = 1_000.0, wall_s: float = EPOCH_S) -> None:
        self._lock = threading.Lock()
        self._elapsed = 0.0
        self._start = start_s
        self._wall = wall_s

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a monotonic clock cannot go back (advance({seconds!r}))")
        with self._lock:
            self._elapsed += seconds

    def monotonic(self) -> float:
        with self._lock:
            return self._start + self._elapsed

    def perf_counter(self) -> float:
        return self.monotonic()

    def wall_time(self) -> float:
        with self._lock:
            return self._wall + self._elapsed

    def utcnow(self) -> datetime:
        return datetime.fromtimestamp(self.wall_time(), UTC)

    def later(self, seconds: float) -> datetime:
        """The UTC time ``seconds`` from now, without moving the clock."""
        return self.utcnow() + timedelta(seconds=seconds)
