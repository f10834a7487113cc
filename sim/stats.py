"""Small statistics for reports: percentiles and Student-t confidence intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Two-sided 95% Student-t critical values by degrees of freedom (1..30); 1.96 beyond.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated ``q``-th percentile (0..100) of an ascending list; None if empty."""
    if not sorted_values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q={q}: must be in [0, 100]")
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% t-interval); half-width 0 for a single value."""
    n = len(values)
    if n == 0:
        raise ValueError("mean_ci95 of no values")
    mean = sum(values) / n
    if n == 1:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    t = _T95[n - 2] if n - 1 <= len(_T95) else 1.96
    return mean, t * math.sqrt(var / n)
