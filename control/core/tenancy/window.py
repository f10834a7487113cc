"""Usage of one tenant on one resource: a sliding window or a set of holds.

Both keep an exact running total so a check costs O(1) amortised. ``now`` must not go backwards
between calls (the drivers' clocks are monotonic).
"""

from __future__ import annotations

from collections import deque


class SlidingUsage:
    """Amounts charged at admission that expire ``period_s`` later; amounts can be corrected."""

    windowed = True

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self._entries: deque[list] = deque()  # [admitted_at, amount, request_id]
        self._live: dict[str, list] = {}
        self._total = 0

    def _expire(self, now: float) -> None:
        horizon = now - self.period_s
        while self._entries and self._entries[0][0] <= horizon:
            _, amount, request_id = self._entries.popleft()
            self._total -= amount
            self._live.pop(request_id, None)

    def add(self, request_id: str, amount: int, now: float) -> None:
        self._expire(now)
        entry = [now, amount, request_id]
        self._entries.append(entry)
        self._live[request_id] = entry
        self._total += amount

    def correct(self, request_id: str, amount: int, now: float) -> None:
        """Set a run's charge to its actual amount, if it still counts in the window."""
        self._expire(now)
        entry = self._live.get(request_id)
        if entry is not None:
            self._total += amount - entry[1]
            entry[1] = amount

    def amount_of(self, request_id: str, now: float) -> int:
        self._expire(now)
        entry = self._live.get(request_id)
        return entry[1] if entry is not None else 0

    def usage(self, now: float) -> int:
        self._expire(now)
        return self._total

    def seconds_until_at_most(self, limit: int, now: float) -> float | None:
        """Seconds until usage drops to ``limit`` or less by expiry alone (None: never)."""
        self._expire(now)
        remaining = self._total
        if remaining <= limit:
            return 0.0
        if limit < 0:
            return None
        for admitted_at, amount, _ in self._entries:
            remaining -= amount
            if remaining <= limit:
                return admitted_at + self.period_s - now
        return None


class HeldUsage:
    """Amounts held by runs in flight until they are released."""

    windowed = False

    def __init__(self) -> None:
        self._held: dict[str, int] = {}
        self._total = 0

    def add(self, request_id: str, amount: int, now: float) -> None:
        self._held[request_id] = self._held.get(request_id, 0) + amount
        self._total += amount

    def correct(self, request_id: str, amount: int, now: float) -> None:
        """A held amount ends at release: the actual figure is always 0 afterwards."""
        self._total += amount - self._held.pop(request_id, 0)
        if amount:
            self._held[request_id] = amount

    def amount_of(self, request_id: str, now: float) -> int:
        return self._held.get(request_id, 0)

    def usage(self, now: float) -> int:
        return self._total

    def seconds_until_at_most(self, limit: int, now: float) -> float | None:
        return 0.0 if self._total <= limit else None
