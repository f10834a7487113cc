"""Fixed limits: max batch size and max padded tokens from the model spec, one max queue delay."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from control.core.batching.base import FormedBatch, QueuedItem, decide
from control.core.types import ModelSpec


@dataclass(frozen=True)
class SizeDelayConfig:
    max_queue_delay_s: float = field(
        default=0.005,
        metadata={"help": "longest time the oldest queued item waits for a batch to fill"},
    )

    def __post_init__(self) -> None:
        if self.max_queue_delay_s < 0:
            raise ValueError(
                f"SizeDelayConfig.max_queue_delay_s={self.max_queue_delay_s}: must be >= 0"
            )


class SizeDelayBatching:
    """A batch forms when full (size or tokens) or when the oldest item waited max delay."""

    def __init__(self, config: SizeDelayConfig | None = None) -> None:
        self.config = config or SizeDelayConfig()

    def form(
        self, ordered: Sequence[QueuedItem], oldest_arrival: float, model: ModelSpec, now: float
    ) -> FormedBatch | None:
        return decide(
            ordered,
            oldest_arrival,
            now,
            model.max_batch_size,
            model.max_batch_tokens,
            self.config.max_queue_delay_s,
        )

    def deadline(self, oldest_arrival: float, model: ModelSpec) -> float:
        return oldest_arrival + self.config.max_queue_delay_s

    def observe(self, model: ModelSpec, batch_size: int, device_us: int) -> None:
        return None

    def max_batch_size(self, model: ModelSpec) -> int:
        return model.max_batch_size
