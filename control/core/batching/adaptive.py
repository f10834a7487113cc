"""Adaptive batch size: keep each model's batch latency under its target.

After every completed batch the policy computes the observed per-item latency and sets the cap
to the largest batch that would still meet the target (``target // per_item``), clamped to
[min_batch_size, model.max_batch_size]. It shrinks at once when over target but grows by at most
``max_step_up`` per observation, so one lucky batch does not swing the cap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from control.core.batching.base import FormedBatch, QueuedItem, decide
from control.core.types import ModelSpec


@dataclass(frozen=True)
class AdaptiveConfig:
    default_target_us: int = field(
        default=50_000, metadata={"help": "batch latency target for models without their own"}
    )
    target_us: Mapping[str, int] = field(
        default_factory=lambda: MappingProxyType({}),
        metadata={"help": "per model key: batch latency target in microseconds"},
    )
    min_batch_size: int = field(default=1, metadata={"help": "the cap never drops below this"})
    max_step_up: int = field(default=1, metadata={"help": "largest cap increase per batch"})
    max_queue_delay_s: float = field(
        default=0.005, metadata={"help": "longest wait of the oldest item for a batch to fill"}
    )

    def __post_init__(self) -> None:
        if self.default_target_us <= 0:
            raise ValueError(
                f"AdaptiveConfig.default_target_us={self.default_target_us}: must be > 0"
            )
        if self.min_batch_size < 1:
            raise ValueError(f"AdaptiveConfig.min_batch_size={self.min_batch_size}: must be >= 1")
        if self.max_step_up < 1:
            raise ValueError(f"AdaptiveConfig.max_step_up={self.max_step_up}: must be >= 1")


class AdaptiveBatching:
    """Size/tokens/delay batching whose size cap follows observed per-item latency."""

    def __init__(self, config: AdaptiveConfig | None = None) -> None:
        self.config = config or AdaptiveConfig()
        self._cap: dict[str, int] = {}

    def max_batch_size(self, model: ModelSpec) -> int:
        return self._cap.get(model.key, model.max_batch_size)

    def form(
        self, ordered: Sequence[QueuedItem], oldest_arrival: float, model: ModelSpec, now: float
    ) -> FormedBatch | None:
        return decide(
            ordered,
            oldest_arrival,
            now,
            self.max_batch_size(model),
            model.max_batch_tokens,
            self.config.max_queue_delay_s,
        )

    def deadline(self, oldest_arrival: float, model: ModelSpec) -> float:
        return oldest_arrival + self.config.max_queue_delay_s

    def observe(self, model: ModelSpec, batch_size: int, device_us: int) -> None:
        """Update the cap of ``model`` from one completed batch (may change only this cap)."""
        if batch_size < 1 or device_us <= 0:
            return
        target = self.config.target_us.get(model.key, self.config.default_target_us)
        per_item = max(1, device_us // batch_size)
        fits = max(self.config.min_batch_size, min(model.max_batch_size, target // per_item))
        current = self.max_batch_size(model)
        self._cap[model.key] = min(fits, current + self.config.max_step_up)
