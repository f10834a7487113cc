"""The app factory: one FastAPI app over a services bundle and, when given, the live parts.

``create_app`` wires auth, the error mapping, the body-size and JSON limits, metrics and every
router over what it is given; it builds and starts nothing live. The composition root
(``control.wiring.gateway``) builds the live parts in order and passes them in, with a
``lifespan`` that starts and stops them around the app's life.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI

from control.api import crud
from control.api.auth import KeyCache
from control.api.errors import install_error_handlers
from control.api.hot_routes import HotRoute, HotRoutes, HotTable
from control.api.json_guard import JsonGuard
from control.api.limits import BodySizeLimit
from control.api.metrics import GatewayMetrics, MetricsMiddleware
from control.api.model_cache import ActiveModels
from control.api.ports import Inference, LiveConfig, WhatIfEngine
from control.api.routes import adapters as lora_adapters
from control.api.routes import (
    admin,
    canary,
    demo_bursts,
    fidelity,
    health,
    plans,
    policies,
    rollout,
    timeline,
    usage,
    variants,
)
from control.api.routes.resources import RESOURCES
from control.api.settings import GatewayConfig
from control.api.state import Gateway
from control.services import Services

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]
DESCRIPTION = (
    "Tenant inference (workflows, OpenAI-compatible routes) and the admin API of the Legato "
    "control plane. Authenticate with `Authorization: Bearer <key>`: a tenant API key for /v1 "
    "routes, the admin token for /admin routes."
)


def create_app(
    services: Services,
    config: GatewayConfig | None = None,
    *,
    spec_validator: Callable[[Mapping[str, Any]], list[str]] | None = None,
    inference: Inference | None = None,
    live_config: LiveConfig | None = None,
    whatif_engine: WhatIfEngine | None = None,
    metrics: GatewayMetrics | None = None,
    extras: Mapping[str, Any] | None = None,
    lifespan: Lifespan | None = None,
) -> FastAPI:
    """A ready app. ``inference`` enables the tenant inference routes' execution (without it
    they answer 503); ``live_config`` feeds committed admin changes to its runtime;
    ``metrics`` are the gateway's (default: new ones; pass the ones the inference service
    reports settled runs to); ``extras`` seed ``Gateway.extras``; ``lifespan`` wraps the
    app's life (start/stop)."""
    config = config or GatewayConfig()
    metrics = metrics or GatewayMetrics()
    app = FastAPI(title="Legato API", version="1.0.0", description=DESCRIPTION,
                  lifespan=lifespan)  # fmt: skip
    app.state.gateway = Gateway(
        services=services,
        config=config,
        key_cache=KeyCache(config.key_cache_ttl_s),
        metrics=metrics,
        spec_validator=spec_validator,
        inference=inference,
        whatif_engine=whatif_engine,
        extras=dict(extras or {}),
        models=ActiveModels(),
        live_config=live_config,
    )
    install_error_handlers(app)
    hot = _include_routes(app)
    if config.hot_routes:  # innermost of ours: inside the size limit and the metrics
        app.state.hot_routes = HotTable(hot)
        app.add_middleware(HotRoutes, table=app.state.hot_routes, handlers=app.exception_handlers)
    app.add_middleware(JsonGuard, max_depth=config.max_json_depth)  # inside the size limit
    app.add_middleware(BodySizeLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


def _include_routes(app: FastAPI) -> tuple[HotRoute, ...]:
    """Every router, in the order Starlette tries them; returns the hot routes."""
    app.include_router(health.router)
    # Starlette tries routes in order: the tenant hot paths go first so that an inference
    # call does not first test itself against every admin CRUD route.
    hot = _include_inference(app)
    for resource in RESOURCES:
        app.include_router(crud.crud_router(resource))
    app.include_router(admin.router)
    app.include_router(variants.router)
    app.include_router(plans.router)
    app.include_router(rollout.router)
    app.include_router(canary.router)
    app.include_router(fidelity.router)
    app.include_router(usage.router)
    app.include_router(timeline.router)
    app.include_router(policies.router)
    app.include_router(demo_bursts.router)
    app.include_router(lora_adapters.admin_router)
    app.include_router(lora_adapters.router)
    return hot


def _include_inference(app: FastAPI) -> tuple[HotRoute, ...]:
    """What-if, runs, OpenAI-compatible, snapshot and WebSocket routes; returns the ones that
    start runs, for :class:`HotRoutes` to serve (each stays declared here for OpenAPI and for
    every call HotRoutes hands over)."""
    from control.api.routes import openai, runs, snapshot, trial_runs, whatif, ws

    app.include_router(openai.router)
    app.include_router(runs.router)
    app.include_router(ws.router)
    app.include_router(whatif.router)
    app.include_router(trial_runs.router)
    app.include_router(snapshot.router)
    return (
        HotRoute("/v1/embeddings", openai.embeddings),
        HotRoute("/v1/chat/completions", openai.chat_completions),
        HotRoute("/v1/completions", openai.completions),
        HotRoute("/v1/rerank", openai.rerank),
        HotRoute("/v1/workflows/{name}/versions/{version}/runs", runs.create_run),
    )
