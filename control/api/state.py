"""The gateway's shared state: what every route reaches through ``gateway(request)``.

Built once by the app factory and stored on ``app.state``; routes never build services or read
settings themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import Request

from control.api.settings import GatewayConfig
from control.services import Services

if TYPE_CHECKING:
    from control.api.auth import KeyCache
    from control.api.metrics import GatewayMetrics
    from control.api.model_cache import ActiveModels
    from control.api.ports import Inference, LiveConfig, WhatIfEngine


@dataclass
class Gateway:
    """Services, config and the live parts (inference, whatif engine) when present."""

    services: Services
    config: GatewayConfig
    key_cache: KeyCache
    metrics: GatewayMetrics
    #: The core's DAG check over the live model catalogue ("location: message" strings).
    spec_validator: Callable[[Mapping[str, Any]], list[str]] | None = None
    inference: Inference | None = None
    #: The twin's what-if engine (``control.services.whatif``) when it is installed.
    whatif_engine: WhatIfEngine | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    #: Active models for the one-model routes (cleared on model changes made here).
    models: ActiveModels | None = None
    #: Feeds committed admin changes to the live core (None without a runtime).
    live_config: LiveConfig | None = None


def gateway(request: Request) -> Gateway:
    """The gateway state of the app serving ``request``."""
    return request.app.state.gateway
