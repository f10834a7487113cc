"""The app factory: one FastAPI app over a services bundle and, when given, the live runtime.

``create_app`` wires auth, the error mapping, the body-size limit, metrics and every router.
It starts nothing: whoever owns the runtime (``legato api``, a test fixture) starts and stops it
around the app's life via ``lifespan`` hooks it passes in.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import FastAPI

from control.api import crud
from control.api.auth import KeyCache
from control.api.errors import install_error_handlers
from control.api.hot_routes import HotRoute, HotRoutes, HotTable
from control.api.limits import BodySizeLimit
from control.api.metrics import GatewayMetrics, MetricsMiddleware
from control.api.model_cache import ActiveModels
from control.api.routes import admin, fidelity, health, rollout, usage
from control.api.routes.resources import RESOURCES
from control.api.settings import GatewayConfig
from control.api.state import Gateway
from control.services import Services
from control.services.live_config import LiveConfigFeed

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def create_app(
    services: Services,
    config: GatewayConfig | None = None,
    *,
    spec_validator: Callable[[Mapping[str, Any]], list[str]] | None = None,
    inference: Any = None,
    whatif_engine: Any = None,
    lifespan: Lifespan | None = None,
) -> FastAPI:
    """A ready app. ``inference`` (an InferenceService) enables the tenant inference routes'
    execution; without it they answer 503. ``lifespan`` wraps the app's life (start/stop)."""
    config = config or GatewayConfig()
    metrics = GatewayMetrics()
    if inference is not None and inference.on_settled is None:
        inference.on_settled = metrics.on_settled
    state = Gateway(
        services=services,
        config=config,
        key_cache=KeyCache(config.key_cache_ttl_s),
        metrics=metrics,
        spec_validator=spec_validator,
        inference=inference,
        whatif_engine=whatif_engine,
        models=ActiveModels(),
        live_config=None if inference is None else LiveConfigFeed(inference.factory, inference),
    )

    @asynccontextmanager
    async def life(app: FastAPI) -> AsyncIterator[None]:
        if lifespan is None:
            yield
            return
        async with lifespan(app):
            yield

    app = FastAPI(
        title="Legato API",
        version="1.0.0",
        description="Tenant inference (workflows, OpenAI-compatible routes) and the admin API "
        "of the Legato control plane. Authenticate with `Authorization: Bearer <key>`: a tenant "
        "API key for /v1 routes, the admin token for /admin routes.",
        lifespan=life,
    )
    app.state.gateway = state
    install_error_handlers(app)
    app.include_router(health.router)
    # Starlette tries routes in order: the tenant hot paths go first so that an inference
    # call does not first test itself against every admin CRUD route.
    hot = _include_inference(app)
    for resource in RESOURCES:
        app.include_router(crud.crud_router(resource))
    app.include_router(admin.router)
    app.include_router(rollout.router)
    app.include_router(fidelity.router)
    app.include_router(usage.router)
    if config.hot_routes:  # innermost of ours: inside the size limit and the metrics
        app.state.hot_routes = HotTable(hot)
        app.add_middleware(HotRoutes, table=app.state.hot_routes, handlers=app.exception_handlers)
    app.add_middleware(BodySizeLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    return app


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
