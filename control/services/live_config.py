"""Live configuration: committed admin changes reach the running core without a restart.

Called after an admin mutation has committed. Each method reads what changed from the database,
turns it into the core's event (``WorkflowRegistered``, ``TenancyConfigChanged``,
``ModelRegistered``, ``DeviceDown``/``DeviceUp``), feeds it to ``LiveRuntime.ingest`` and keeps
the gateway's :class:`LiveCatalog` in step. The outcome is a value saying what was applied, or
why nothing was (a twin-only model, a device this gateway does not run, the core's refusal);
the stored change stands either way.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.core.events import (
    DeviceDown,
    DeviceUp,
    ModelRegistered,
    TenancyConfigChanged,
    WorkflowRegistered,
)
from control.services.fleet_state import device_spec, model_ref, model_spec, workflow_spec
from control.services.ports import ConfigurableRuntime, FeedTarget
from control.store.tenancy_snapshot import load_tenancy_config
from db import models as m
from db.session import session_scope

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FeedOutcome:
    """What the live core was told. ``applied`` False: nothing changed there, ``reason`` why."""

    applied: bool
    event: str | None
    reason: str


def _skipped(reason: str) -> FeedOutcome:
    return FeedOutcome(False, None, reason)


class LiveConfigFeed:
    """Feeds committed changes to ``inference.runtime`` (an InferenceService's LiveRuntime)."""

    def __init__(self, factory: sessionmaker[Session], inference: FeedTarget) -> None:
        self._factory = factory
        self._inference = inference

    @property
    def _runtime(self) -> ConfigurableRuntime:
        return self._inference.runtime

    async def _read(self, fn: Any, *args: Any) -> Any:
        return await self._inference.writer.run_in_db_thread(fn, *args)

    async def _ingest(self, event: object, done: str) -> FeedOutcome:
        if not self._inference.started:
            return _skipped("the live runtime is not running; it reads the database at start")
        try:
            await self._runtime.ingest(event)
        except Exception as exc:  # the core's refusal: the stored change stands, say why
            log.warning("live core refused %s: %s", type(event).__name__, exc)
            return FeedOutcome(False, type(event).__name__, f"the live core refused it: {exc}")
        return FeedOutcome(True, type(event).__name__, done)

    # ---- workflows --------------------------------------------------------------------------
    async def workflow_changed(self, workflow_id: int) -> FeedOutcome:
        """An active workflow is (re)registered; a draft or retired one stops being served."""
        row = await self._read(self._row, m.Workflow, workflow_id, workflow_spec)
        if row is None:
            return _skipped(f"workflow {workflow_id} not found")
        status, spec = row
        catalog = self._inference.catalog
        if status != "active":
            catalog.workflows.pop(spec.workflow, None)
            return FeedOutcome(True, None, f"workflow {spec.workflow} is {status}: not served")
        missing = [n.model for n in spec.nodes if n.model and n.model not in catalog.models]
        if missing:
            catalog.workflows.pop(spec.workflow, None)
            return _skipped(f"workflow {spec.workflow} needs models not served here: {missing}")
        outcome = await self._ingest(WorkflowRegistered(spec), f"workflow {spec.workflow} live")
        if outcome.applied:
            catalog.workflows[spec.workflow] = spec
            self._publish_workflows()
        return outcome

    def _publish_workflows(self) -> None:
        """The runtime looks up a run's node kinds in its blueprint: keep it current."""
        blueprint = self._runtime.blueprint
        workflows = tuple(self._inference.catalog.workflows.values())
        self._runtime.blueprint = replace(blueprint, workflows=workflows)

    # ---- tenancy ----------------------------------------------------------------------------
    async def tenancy_changed(self) -> FeedOutcome:
        """Tenants, cohorts, quotas or headroom changed: the whole tenancy config again."""
        config = await self._read(self._tenancy)
        outcome = await self._ingest(TenancyConfigChanged(config), "tenancy config reloaded")
        if outcome.applied:
            self._inference.catalog.set_tenancy(config)
        return outcome

    def _tenancy(self) -> Any:
        with session_scope(self._factory) as session:
            return load_tenancy_config(session)

    # ---- models and devices -----------------------------------------------------------------
    async def model_changed(self, model_id: int) -> FeedOutcome:
        """A new or changed active model with local weights (or weights the runtime was given
        for it) is registered (and loadable); its autoscaling settings apply from then on."""
        row = await self._read(self._model, model_id)
        if row is None:
            return _skipped(f"model {model_id} not found")
        status, spec, ref = row
        if ref is None and spec is not None:  # weights the runtime was given (not in the row)
            ref = self._runtime.model_refs.get(spec.key)
        if status != "active" or spec is None or ref is None:
            return _skipped(f"model {model_id} is {status} or has no local weights: twin only")
        outcome = await self._ingest(ModelRegistered(spec), f"model {spec.key} registered")
        if outcome.applied:
            self._runtime.model_refs[spec.key] = ref
            self._inference.catalog.models[spec.key] = spec
            self._inference.model_ids[spec.key] = model_id
        return outcome

    async def device_changed(self, device_id: int) -> FeedOutcome:
        """A device of this gateway went down or came back (and headroom pools moved)."""
        row = await self._read(self._device, device_id)
        if row is None:
            return _skipped(f"device {device_id} not found")
        spec, status = row
        known = {d.device_id for d in self._runtime.blueprint.devices}
        if spec.device_id not in known:
            return _skipped(f"device {spec.device_id} is not run by this gateway")
        if status == "up":
            outcome = await self._ingest(DeviceUp(spec), f"device {spec.device_id} up")
        else:
            reason = f"operator marked device {spec.device_id} {status}"
            outcome = await self._ingest(DeviceDown(spec.device_id, reason), reason)
        await self.tenancy_changed()  # headroom pools are resolved over devices that are up
        return outcome

    # ---- reads (database thread) ------------------------------------------------------------
    def _row(self, model: Any, id_: int, convert: Any) -> tuple[str, Any] | None:
        with session_scope(self._factory) as session:
            row = session.get(model, id_)
            return None if row is None else (row.status, convert(row))

    def _model(self, model_id: int) -> tuple[str, Any, Any] | None:
        with session_scope(self._factory) as session:
            row = session.get(m.ServedModel, model_id)
            return None if row is None else (row.status, model_spec(row), model_ref(row))

    def _device(self, device_id: int) -> tuple[Any, str] | None:
        with session_scope(self._factory) as session:
            row = session.get(m.Device, device_id)
            if row is None:
                return None
            node = session.get(m.Node, row.node_id)
            return device_spec(row, node.name if node else str(row.node_id)), row.status
