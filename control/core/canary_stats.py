"""What a canary is judged on: each variant's outcomes, and the verdict over them.

``VariantStats`` keeps, per variant (baseline or canary), the totals since the canary started
(completed steps and failed ones) and the last ``window`` judged outcomes (ok, dispatch-to-
completion seconds). ``verdict`` compares the two windows under ``CanaryConfig`` and returns
the reason to roll the canary back, or None. Pure: no clock, no I/O.

The baseline's window holds only its control cohort: the runs whose hash point
(:func:`hash_point`) falls in the band just above the canary's (:func:`in_control`), as many
runs as the canary takes. Both windows then fill at the same pace and cover the same stretch of
time under the same load; judged against the baseline's whole traffic, the canary's window
(filling more slowly) reached further back in time, and a healthy canary was rolled back for
latency spikes the baseline's shorter window had already forgotten.
"""

from __future__ import annotations

import zlib
from collections import deque
from dataclasses import dataclass, field

#: Fractions of traffic are integers in parts per million (1.0 == PPM).
PPM = 1_000_000


def hash_point(request_id: str) -> int:
    """Where a run falls in [0, PPM): stable per request id (a retry lands in the same place)."""
    return zlib.crc32(request_id.encode()) % PPM


def in_control(point: int, fraction_ppm: int) -> bool:
    """Whether a baseline run at ``point`` is in the control cohort of a canary taking
    ``fraction_ppm``: the band of that width above the canary's (or the rest, when smaller)."""
    return fraction_ppm <= point < min(PPM, 2 * fraction_ppm)


#: A canary's states (see :class:`~control.core.actions.CanaryTransition`).
RUNNING, ROLLED_BACK, ENDED = "running", "rolled_back", "ended"


@dataclass(frozen=True)
class CanaryConfig:
    """When a canary is rolled back automatically (both variants need ``min_samples`` recent
    outcomes before any verdict)."""

    error_margin: float = field(
        default=0.05,
        metadata={"help": "roll a canary back when its error rate exceeds the baseline's by "
                          "more than this (absolute: 0.05 is five percentage points)"},
    )  # fmt: skip
    p99_margin: float = field(
        default=1.0,
        metadata={"help": "roll a canary back when its p99 step latency exceeds the baseline's "
                          "by more than this fraction of it (1.0: more than twice the baseline)"},
    )  # fmt: skip
    p99_min_delta_s: float = field(
        default=0.05,
        metadata={"help": "and only when its p99 exceeds the baseline's by at least this many "
                          "seconds: tail latency over a few hundred steps is noisy (two healthy "
                          "copies of a 20 ms model differed by 2.2x at p99 on a shared CPU)"},
    )  # fmt: skip
    min_samples: int = field(
        default=20, metadata={"help": "recent outcomes each variant needs before a verdict"}
    )
    window: int = field(
        default=200, metadata={"help": "most recent outcomes per variant the verdict weighs"}
    )

    def __post_init__(self) -> None:
        if not self.error_margin >= 0:
            raise ValueError(f"canary error_margin must be >= 0, got {self.error_margin!r}")
        if not self.p99_margin >= 0:
            raise ValueError(f"canary p99_margin must be >= 0, got {self.p99_margin!r}")
        if not self.p99_min_delta_s >= 0:
            raise ValueError(f"canary p99_min_delta_s must be >= 0, got {self.p99_min_delta_s!r}")
        if self.min_samples < 1:
            raise ValueError(f"canary min_samples must be >= 1, got {self.min_samples!r}")
        if self.window < self.min_samples:
            raise ValueError(f"canary window must be >= min_samples, got {self.window!r}")


class VariantStats:
    """One variant's outcomes: totals, and the last ``window`` (ok, latency seconds)."""

    __slots__ = ("key", "requests", "errors", "recent")

    def __init__(self, key: str, window: int) -> None:
        self.key = key
        self.requests = 0
        self.errors = 0
        self.recent: deque[tuple[bool, float]] = deque(maxlen=window)

    def observe(self, ok: bool, latency_s: float, judged: bool = True) -> None:
        """Count an outcome; into the judged window too when ``judged``."""
        self.requests += 1
        self.errors += 0 if ok else 1
        if judged:
            self.recent.append((ok, latency_s))

    def error_rate(self) -> float:
        """Failed share of the recent outcomes (0.0 with none)."""
        n = len(self.recent)
        return sum(1 for ok, _ in self.recent if not ok) / n if n else 0.0

    def p99_s(self) -> float | None:
        """The 99th percentile (nearest rank) of the recent latencies; None with none."""
        if not self.recent:
            return None
        ordered = sorted(lat for _, lat in self.recent)
        rank = max(0, -(-99 * len(ordered) // 100) - 1)
        return ordered[rank]


def verdict(cfg: CanaryConfig, baseline: VariantStats, canary: VariantStats) -> str | None:
    """The reason to roll the canary back, or None (too few samples, or within the margins)."""
    nb, nc = len(baseline.recent), len(canary.recent)
    if nb < cfg.min_samples or nc < cfg.min_samples:
        return None
    eb, ec = baseline.error_rate(), canary.error_rate()
    if ec > eb + cfg.error_margin:
        return (f"error rate {ec:.1%} over {nc} steps exceeds the baseline's {eb:.1%} over {nb} "
                f"by more than {cfg.error_margin:.1%}")  # fmt: skip
    pb, pc = baseline.p99_s(), canary.p99_s()
    if (pb is not None and pc is not None and pc > pb * (1.0 + cfg.p99_margin)
            and pc - pb >= cfg.p99_min_delta_s):  # fmt: skip
        return (f"p99 {pc * 1000:.1f} ms exceeds the baseline's {pb * 1000:.1f} ms by more than "
                f"{cfg.p99_margin:.0%} (and {cfg.p99_min_delta_s * 1000:g} ms)")  # fmt: skip
    return None


@dataclass(frozen=True)
class VariantView:
    """One variant of a canary as the snapshot shows it: totals since the canary started and
    the recent window's error rate and p99 (seconds; None before any outcome)."""

    model_key: str
    requests: int
    errors: int
    samples: int
    error_rate: float
    p99_s: float | None

    @staticmethod
    def of(s: VariantStats) -> VariantView:
        return VariantView(s.key, s.requests, s.errors, len(s.recent), s.error_rate(), s.p99_s())


@dataclass(frozen=True)
class CanaryView:
    """A canary in the snapshot: baseline key, canary key, fraction (ppm), state (running,
    rolled_back, ended), the reason of its last change and when (core seconds), each variant's
    figures, and its replicas still draining."""

    model_key: str
    canary_key: str
    fraction_ppm: int
    state: str
    reason: str
    changed_at: float
    baseline: VariantView
    canary: VariantView
    draining: tuple[str, ...]
