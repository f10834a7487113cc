"""The live runtime and inference service as the services see them: Protocols, not ``Any``.

Each Protocol lists exactly what its callers use, so a fake in a test needs only that much and
a second runtime (another executor backend) knows what it must offer. The concrete classes
(``control.runtime.live.LiveRuntime``, ``control.services.inference.InferenceService``)
satisfy them; ``tests/api/test_ports.py`` checks it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from control.core.assembly import CoreBlueprint
    from control.core.snapshot import CoreSnapshot
    from control.executor.protocol import ModelRef
    from control.services.live_catalog import LiveCatalog


@runtime_checkable
class RolloutRuntime(Protocol):
    """What a rollout needs of the live runtime (``RolloutService``): the core's view and the
    door for events (``PlacementChanged``, ``RollbackRequested``; raises the core's refusal)."""

    def snapshot(self) -> CoreSnapshot: ...

    async def ingest(self, event: object) -> None: ...


@runtime_checkable
class ConfigurableRuntime(RolloutRuntime, Protocol):
    """What the live-config feed changes on the runtime besides ingesting events: the
    blueprint it looks node kinds up in and the executor references of loadable models."""

    #: replaced by the feed when the workflows change (node kinds are looked up in it)
    blueprint: CoreBlueprint

    @property
    def model_refs(self) -> dict[str, ModelRef]:
        """Executor references of the loadable models (the feed adds registered ones)."""
        ...


@runtime_checkable
class DbThread(Protocol):
    """The inference writer's database thread (reads that must see every committed write)."""

    async def run_in_db_thread(self, fn: Callable[..., Any], *args: Any) -> Any: ...


@runtime_checkable
class FeedTarget(Protocol):
    """What ``LiveConfigFeed`` keeps in step with the database (an ``InferenceService``)."""

    @property
    def runtime(self) -> ConfigurableRuntime: ...

    @property
    def writer(self) -> DbThread: ...

    @property
    def started(self) -> bool:
        """The runtime runs (changes are fed only then)."""
        ...

    @property
    def catalog(self) -> LiveCatalog: ...

    @property
    def model_ids(self) -> dict[str, int]:
        """Model key -> database id, for the ledger (the feed adds registered models)."""
        ...
