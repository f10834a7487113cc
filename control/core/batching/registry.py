"""Batching strategies by name (a :class:`~control.core.registry.PolicyRegistry`)."""

from __future__ import annotations

from control.core.batching.adaptive import AdaptiveBatching, AdaptiveConfig
from control.core.batching.base import BatchPolicy
from control.core.batching.queue_building import QueueBuildingBatching, QueueBuildingConfig
from control.core.batching.size_delay import SizeDelayBatching, SizeDelayConfig
from control.core.registry import PolicyEntry, PolicyRegistry

BATCHING: PolicyRegistry[BatchPolicy] = PolicyRegistry(
    "batching strategy",
    (
        PolicyEntry(
            "size_delay", SizeDelayConfig, SizeDelayBatching,
            "a batch when it is full or its oldest item waited the max queue delay (default)",
        ),
        PolicyEntry(
            "adaptive", AdaptiveConfig, AdaptiveBatching,
            "max batch size learnt per model from observed latencies against an SLO",
        ),
        PolicyEntry(
            "queue_building", QueueBuildingConfig, QueueBuildingBatching,
            "waits for a batch to fill only while the queue is building, up to a max delay "
            "(serving's default)",
        ),
    ),
)  # fmt: skip


def make_batching(name: str, config: object | None = None) -> BatchPolicy:
    """Build the named strategy; ``config`` must be its config type (default config if None).
    Raises ValueError naming an unknown name, TypeError for a config of another type."""
    return BATCHING.build(name, config)
