"""The canary's one action: a change of its state, audited by the drivers."""

from __future__ import annotations

from control.core.values import value


@value
class CanaryTransition:
    """A canary of ``model_key`` (the baseline key workflows name) on ``canary_key`` changed
    state: "running" (set or its fraction changed), "rolled_back" (the core judged it worse than
    the baseline: its fraction is 0 and its replicas drain) or "ended" (an operator set the
    fraction to 0). ``from_state`` is "" for a new canary. ``figures``: (name, value) pairs of
    the verdict's inputs (each variant's recent error rate, p99 seconds and sample count)."""

    model_key: str
    canary_key: str
    from_state: str
    to_state: str
    fraction_ppm: int
    reason: str
    figures: tuple[tuple[str, float], ...] = ()
