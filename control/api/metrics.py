"""Prometheus metrics of the gateway, on a registry of its own (one per app instance).

The middleware times every HTTP request by route template (never by raw path, which would let
callers create unbounded label sets); the inference use case counts runs, rejections and billed
tokens per tenant through :class:`GatewayMetrics`.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control.clock import perf_counter
from control.runtime.metrics import Children

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class GatewayMetrics:
    """The gateway's counters and histograms; ``render()`` is the /metrics body."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.http_requests = Counter(
            "legato_http_requests_total",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_seconds = Histogram(
            "legato_http_request_seconds",
            "Gateway latency by route template (whole response, streaming included).",
            ["route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.runs = Counter(
            "legato_runs_total",
            "Settled workflow runs by tenant id and request status (succeeded, failed, rejected).",
            ["tenant_id", "outcome"],
            registry=self.registry,
        )
        self.tokens = Counter(
            "legato_billed_tokens_total",
            "Tokens written to the usage ledger, by tenant and direction (input, output).",
            ["tenant", "direction"],
            registry=self.registry,
        )
        self.cost_units = Counter(
            "legato_billed_cost_units_total",
            "Cost units written to the usage ledger, by tenant.",
            ["tenant"],
            registry=self.registry,
        )
        # every request and every settled run update these: children resolved once each
        self.http_requests_by = Children(self.http_requests)
        self.http_seconds_by = Children(self.http_seconds)
        self._runs = Children(self.runs)
        self._tokens = Children(self.tokens)
        self._cost_units = Children(self.cost_units)

    def on_settled(self, request_id: str, record: Any, usage: tuple[Any, ...]) -> None:
        """Count a settled run and what the ledger billed for it (InferenceService hook)."""
        self._runs.labels(str(record.tenant_id), str(record.status)).inc()
        for u in usage:
            tenant = str(u.tenant_id)
            self._tokens.labels(tenant, "input").inc(u.input_tokens)
            self._tokens.labels(tenant, "output").inc(u.output_tokens)
            self._cost_units.labels(tenant).inc(u.cost_units)

    def render(self, *extra: CollectorRegistry) -> bytes:
        """The exposition of this registry and of ``extra`` ones (the runtime's)."""
        return b"".join(generate_latest(r) for r in (self.registry, *extra))


class MetricsMiddleware:
    """Counts and times HTTP requests by the route template that served them."""

    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = perf_counter()
        status = 500

        async def tracking(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        finally:
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            self.metrics.http_requests_by.labels(scope["method"], route, str(status)).inc()
            self.metrics.http_seconds_by.labels(route).observe(perf_counter() - start)
