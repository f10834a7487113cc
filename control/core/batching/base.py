"""Batching contract: a local scheduler asks its policy whether a batch forms now.

``form`` is called by the engine when a replica is free and its queue changed or a batching
deadline passed. The queue is given in the order the tenancy half chose (fair share); a policy
takes a prefix of it and never reorders. ``deadline`` tells the engine when to step again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from control.core.types import ModelSpec
from control.core.values import value


class QueuedItem(Protocol):
    key: str
    arrival: float  # when the step entered a queue (waiting time counts from here)
    input_tokens: int


@value
class FormedBatch:
    count: int  # take this many items from the front of the ordered queue
    padded_tokens: int  # longest prompt in the batch x count
    reason: str


class BatchPolicy(Protocol):
    def form(
        self, ordered: Sequence[QueuedItem], oldest_arrival: float, model: ModelSpec, now: float
    ) -> FormedBatch | None:
        """A batch to dispatch now, or None to keep waiting (until ``deadline``)."""
        ...

    def deadline(self, oldest_arrival: float, model: ModelSpec) -> float:
        """When the oldest queued item's delay is up: a batch must form by then."""
        ...

    def observe(self, model: ModelSpec, batch_size: int, device_us: int) -> None:
        """Feedback from a completed batch (adaptive policies learn from it)."""
        ...

    def max_batch_size(self, model: ModelSpec) -> int:
        """The size cap in force now for ``model``."""
        ...


def take_fitting(
    ordered: Sequence[QueuedItem], max_size: int, max_tokens: int
) -> tuple[int, int, bool, str]:
    """Greedy prefix of ``ordered`` within the size and padded-token limits.

    Returns (count, padded_tokens, full, why_full). ``full`` is True when the size limit is
    reached or the next item would break the token limit. An item too long to share a batch
    with anyone is taken alone (it could never run otherwise).
    """
    count = 0
    longest = 0
    for item in ordered:
        if count == max_size:
            return count, longest * count, True, f"full: {count}/{max_size} items"
        new_longest = max(longest, item.input_tokens)
        if new_longest * (count + 1) > max_tokens:
            if count == 0:
                return 1, new_longest, True, f"oversized item ({new_longest} tokens) runs alone"
            why = f"full: {count + 1} items would pad to {new_longest * (count + 1)} > {max_tokens} tokens"
            return count, longest * count, True, why
        longest = new_longest
        count += 1
    full = count == max_size
    return count, longest * count, full, f"full: {count}/{max_size} items" if full else ""


def decide(
    ordered: Sequence[QueuedItem],
    oldest_arrival: float,
    now: float,
    max_size: int,
    max_tokens: int,
    max_delay_s: float,
) -> FormedBatch | None:
    """Shared size/tokens/delay rule: dispatch when full or when the oldest item's delay is up."""
    if not ordered:
        return None
    count, padded, full, why = take_fitting(ordered, max_size, max_tokens)
    if full:
        return FormedBatch(count, padded, why)
    # same float expression as the policies' deadline(), so a wake-up at the deadline fires
    if now >= oldest_arrival + max_delay_s:
        reason = (
            f"max delay {max_delay_s * 1000:.1f} ms reached for the oldest item ({count} items)"
        )
        return FormedBatch(count, padded, reason)
    return None
