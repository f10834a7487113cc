"""Integer token bucket: smooths a tenant's bursts at a finer timescale than its quotas.

Levels are kept in milli-tokens and refilled from elapsed whole milliseconds; the fraction of a
millisecond not yet credited stays on the clock (``_credited_until``), so nothing drifts.
"""

from __future__ import annotations

import math


class TokenBucket:
    """Capacity ``capacity`` tokens, refilled by ``refill`` tokens every ``period_s`` seconds."""

    def __init__(self, capacity: int, refill: int, period_s: float, now: float) -> None:
        if capacity <= 0 or refill <= 0 or period_s <= 0:
            raise ValueError(
                f"token bucket needs capacity, refill and period_s > 0, got capacity={capacity}, "
                f"refill={refill}, period_s={period_s}"
            )
        self.capacity = capacity
        self.refill = refill
        self.period_ms = max(1, round(period_s * 1000))
        self._level_milli = capacity * 1000
        self._credited_ms = math.floor(now * 1000)

    def _advance(self, now: float) -> None:
        now_ms = math.floor(now * 1000)
        elapsed = now_ms - self._credited_ms
        if elapsed <= 0:
            return
        self._credited_ms = now_ms
        # refill/period tokens per ms, in milli-tokens: refill * 1000 * elapsed / period_ms
        gained = self.refill * 1000 * elapsed // self.period_ms
        self._level_milli = min(self.capacity * 1000, self._level_milli + gained)

    def level(self, now: float) -> int:
        """Whole tokens available now."""
        self._advance(now)
        return self._level_milli // 1000

    def wait_for(self, amount: int, now: float) -> float:
        """Seconds until ``amount`` tokens are available (0.0 if now). Amounts above capacity
        are capped at capacity so a large request is not refused forever."""
        self._advance(now)
        need = min(amount, self.capacity) * 1000 - self._level_milli
        if need <= 0:
            return 0.0
        per_ms = self.refill * 1000  # milli-tokens gained per period_ms milliseconds
        ms = -(-need * self.period_ms // per_ms)
        return ms / 1000

    def take(self, amount: int, now: float) -> None:
        """Remove ``amount`` (capped at capacity); call only after ``wait_for`` returned 0."""
        self._advance(now)
        self._level_milli -= min(amount, self.capacity) * 1000
