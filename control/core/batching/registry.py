"""Batching strategies by name. Add a strategy by adding an entry, never an elif."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from control.core.batching.adaptive import AdaptiveBatching, AdaptiveConfig
from control.core.batching.base import BatchPolicy
from control.core.batching.size_delay import SizeDelayBatching, SizeDelayConfig

BATCHING: dict[str, tuple[type, Callable[[Any], BatchPolicy]]] = {
    "size_delay": (SizeDelayConfig, SizeDelayBatching),
    "adaptive": (AdaptiveConfig, AdaptiveBatching),
}


def make_batching(name: str, config: object | None = None) -> BatchPolicy:
    """Build the named strategy; ``config`` must be its config type (default config if None)."""
    try:
        config_type, factory = BATCHING[name]
    except KeyError:
        raise ValueError(f"unknown batching strategy {name!r}; known: {sorted(BATCHING)}") from None
    if config is not None and not isinstance(config, config_type):
        raise TypeError(
            f"batching {name!r} needs a {config_type.__name__}, got {type(config).__name__}"
        )
    return factory(config)
