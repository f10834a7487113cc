"""The gateway's live parts as the routes see them: Protocols, not ``Any``.

Each lists exactly what the API's callers use (grep ``gw.inference``, ``gw.whatif_engine``,
``gw.live_config``), so a test double needs only that much. The wiring
(``control.wiring``) builds the concrete ones: ``InferenceService`` over a ``LiveRuntime``,
``TwinEngine``, ``LiveConfigFeed``; ``tests/api/test_ports.py`` checks they satisfy these.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from control.services.ports import RolloutRuntime

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from control.core.snapshot import CoreSnapshot
    from control.runtime.types import StreamDelta
    from control.services.inference_calls import RunCall, Started
    from control.services.live_catalog import LiveCatalog
    from control.services.live_config import FeedOutcome
    from control.store.records import RequestRecord


class RuntimeMetrics(Protocol):
    """The live runtime's metrics: ``/metrics`` serves their registry beside the gateway's."""

    @property
    def registry(self) -> CollectorRegistry: ...


@runtime_checkable
class GatewayRuntime(RolloutRuntime, Protocol):
    """The live runtime as the gateway reaches it: rollouts (snapshot, ingest) and metrics."""

    @property
    def metrics(self) -> RuntimeMetrics: ...


@runtime_checkable
class Inference(Protocol):
    """Runs tenant requests on the live runtime and records them (``InferenceService``)."""

    @property
    def runtime(self) -> GatewayRuntime: ...

    @property
    def catalog(self) -> LiveCatalog:
        """The workflows and models the live core serves (kept current by the feed)."""
        ...

    def readiness(self) -> str:
        """ "ok", or why no request can be served now."""
        ...

    def snapshot(self) -> CoreSnapshot: ...

    def recent(self, limit: int = 50) -> list[RequestRecord]: ...

    async def cancel(self, request_id: str, actor: str, reason: str) -> RequestRecord:
        """Stop the run through the runtime; its record (``cancelled``); Conflict if ended."""
        ...

    def stream(self, request_id: str) -> AsyncIterator[StreamDelta] | None: ...

    async def submit(self, call: RunCall) -> Started: ...

    async def wait(self, request_id: str, timeout_s: float) -> RequestRecord: ...

    async def recorded(self, request_id: str) -> None: ...

    async def get(self, request_id: str) -> RequestRecord: ...


@runtime_checkable
class WhatIfEngine(Protocol):
    """Starts stored pending what-if runs on the twin (``TwinEngine``)."""

    def submit(self, actor: str, run_id: int) -> None: ...


@runtime_checkable
class ScenarioPreparer(Protocol):
    """An engine that also fills a scenario's defaults before it is stored (optional)."""

    def prepare(self, scenario: Mapping[str, Any]) -> dict[str, Any]: ...


@runtime_checkable
class LiveConfig(Protocol):
    """Feeds committed admin changes to the live core (``LiveConfigFeed``)."""

    async def workflow_changed(self, workflow_id: int) -> FeedOutcome: ...

    async def model_changed(self, model_id: int) -> FeedOutcome: ...

    async def device_changed(self, device_id: int) -> FeedOutcome: ...

    async def tenancy_changed(self) -> FeedOutcome: ...
