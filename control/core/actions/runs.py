"""Actions that end or refuse a run: refused at admission, preempted, finished."""

from __future__ import annotations

from collections.abc import Mapping

from control.core.types import InputRef
from control.core.values import value


@value
class Reject:
    request_id: str
    reason: str
    retry_after_s: float


@value
class Preempt:
    """Cancel a run: drop its queued steps; the driver cancels ``cancel_keys`` in flight."""

    request_id: str
    cancel_keys: tuple[str, ...]
    reason: str


@value
class RunFinished:
    request_id: str
    status: str  # "succeeded" | "failed" | "preempted" | "timed_out" | "cancelled"
    outputs: Mapping[str, tuple[InputRef, ...]]
    error: str | None
    reason: str
    #: a failed run's fault class when one step's failure decided it (``bad_input``: the run's
    #: input is unusable, the caller's to fix) and the input to blame (``inputs.text``)
    fault: str | None = None
    field: str | None = None
