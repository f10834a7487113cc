"""Judging a rolled-out plan: did the p99 observed live stay within the twin's prediction?

The twin publishes its own error (``p99_error``: |twin - live| / live of the last fidelity
report); a plan's observed p99 may exceed its predicted p99 by that relative error plus the
operator's ``margin`` (a fraction too) before the plan is flagged. Pure: the caller reads the
figures and decides what to do with a flag (the live observer rolls back where enabled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from control.core.placement.plan import PlanError


@dataclass(frozen=True)
class PlanOutcome:
    """``bound_s``: the highest observed p99 that passes (None: nothing to compare).
    ``flagged``: the observed p99 is above it. ``reason``: the comparison in a sentence."""

    flagged: bool
    bound_s: float | None
    reason: str


def judge_outcome(
    predicted_p99_s: float | None, observed_p99_s: float | None, twin_error: float, margin: float
) -> PlanOutcome:
    """Flag when observed > predicted x (1 + twin_error + margin). ``twin_error`` and
    ``margin`` are fractions >= 0 (PlanError otherwise); a missing figure never flags."""
    for name, v in (("twin_error", twin_error), ("margin", margin)):
        if not (math.isfinite(v) and v >= 0):
            raise PlanError(f"judge_outcome {name}={v!r}: must be finite and >= 0")
    if predicted_p99_s is None:
        return PlanOutcome(
            False, None, "no prediction to compare with (the plan was not simulated)"
        )
    if observed_p99_s is None:
        return PlanOutcome(False, None, "nothing was observed in the window")
    bound = predicted_p99_s * (1.0 + twin_error + margin)
    over = observed_p99_s > bound
    verdict = "exceeds" if over else "is within"
    return PlanOutcome(
        over,
        bound,
        f"observed p99 {observed_p99_s * 1000:.1f} ms {verdict} the predicted "
        f"{predicted_p99_s * 1000:.1f} ms x (1 + twin error {twin_error:.3f} + margin "
        f"{margin:.3f}) = {bound * 1000:.1f} ms",
    )
