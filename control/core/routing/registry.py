"""Routing strategies by name. Add a strategy by adding an entry, never an elif."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from control.core.routing.base import RoutingPolicy
from control.core.routing.predicted_completion import (
    PredictedCompletionConfig,
    PredictedCompletionRouting,
)

ROUTING: dict[str, tuple[type, Callable[[Any], RoutingPolicy]]] = {
    "predicted_completion": (PredictedCompletionConfig, PredictedCompletionRouting),
}


def make_routing(name: str, config: object | None = None) -> RoutingPolicy:
    """Build the named strategy; ``config`` must be its config type (default config if None)."""
    try:
        config_type, factory = ROUTING[name]
    except KeyError:
        raise ValueError(f"unknown routing strategy {name!r}; known: {sorted(ROUTING)}") from None
    if config is not None and not isinstance(config, config_type):
        raise TypeError(
            f"routing {name!r} needs a {config_type.__name__}, got {type(config).__name__}"
        )
    return factory(config)
