"""Routing strategies by name (a :class:`~control.core.registry.PolicyRegistry`)."""

from __future__ import annotations

from control.core.registry import PolicyEntry, PolicyRegistry
from control.core.routing.base import RoutingPolicy
from control.core.routing.predicted_completion import (
    PredictedCompletionConfig,
    PredictedCompletionRouting,
)

ROUTING: PolicyRegistry[RoutingPolicy] = PolicyRegistry(
    "routing strategy",
    (
        PolicyEntry(
            "predicted_completion", PredictedCompletionConfig, PredictedCompletionRouting,
            "the replica predicted to finish the step first: queue, load, transfer, prefix hits",
        ),
    ),
)  # fmt: skip


def make_routing(name: str, config: object | None = None) -> RoutingPolicy:
    """Build the named strategy; ``config`` must be its config type (default config if None).
    Raises ValueError naming an unknown name, TypeError for a config of another type."""
    return ROUTING.build(name, config)
