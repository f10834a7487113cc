"""Canary model versions on the live runtime: set one, end one, read its state.

``set(actor, name, version, fraction, baseline_version=None)`` sends ``fraction`` of the traffic
of the model's baseline version (the key workflows name: ``name:baseline``) to ``name:version``.
The baseline defaults to the model's one other active version (a ValidationError naming
``baseline_version`` when there is none or several). It ingests ``CanaryChanged`` into the live
runtime (Conflict with the core's reason when the core refuses it, e.g. a version the runtime
cannot load; nothing is then changed or audited) and audits the change. Fraction 0 ends the
canary. The automatic rollback is the core's (:mod:`control.core.canary`); the runtime reports
it as a ``CanaryTransition``, audited by :class:`~control.services.canary_record.CanaryRecorder`.

``state(name)`` is the running core's view of the model's canary (per-variant requests, errors,
error rate, p99); without a runtime both raise ``ServiceUnavailable``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.core.canary_stats import PPM
from control.core.errors import CoreError
from control.core.events import CanaryChanged
from control.services.audit import write_audit
from control.services.errors import Conflict, NotFound, ValidationError
from control.services.inference_calls import ServiceUnavailable
from control.services.ports import RolloutRuntime
from db import models as m
from db.session import session_scope

ENTITY = "model_canary"


class CanaryService:
    """Canaries of model versions on ``runtime`` (the live runtime, or None: then 503)."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        runtime: RolloutRuntime | None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._factory = factory
        self._runtime = runtime
        self._clock = clock

    @property
    def runtime(self) -> RolloutRuntime:
        if self._runtime is None:
            raise ServiceUnavailable("no live runtime: canaries need a running gateway runtime")
        return self._runtime

    async def set(
        self, actor: str, name: str, version: str, fraction: float,
        baseline_version: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """Start, re-weigh or (fraction 0) end the canary of ``name:version``; returns the
        state after the change is recorded (see :meth:`state`)."""
        runtime = self.runtime
        if not 0.0 <= fraction <= 1.0:
            raise ValidationError("fraction", fraction, "must be between 0 and 1")
        base = self._baseline(name, version, baseline_version)
        event = CanaryChanged(f"{name}:{base}", f"{name}:{version}", round(fraction * PPM),
                              f"operator {actor} set {name}:{version} to {fraction:g} of "
                              f"{name}:{base}'s traffic")  # fmt: skip
        before = self._view(name)
        try:
            await runtime.ingest(event)
        except CoreError as refused:  # the core judged it against its catalog: unchanged
            raise Conflict(f"canary {event.canary_key} cannot be set: {refused}") from None
        with session_scope(self._factory) as session:
            write_audit(session, at=self._clock(), actor=actor, action="canary_set",
                        entity_type=ENTITY, entity_id=event.model_key, before=before,
                        after={"canary_key": event.canary_key, "fraction": fraction,
                               "fraction_ppm": event.fraction_ppm})  # fmt: skip
        await self._applied(event)
        return self.state(name)

    async def _applied(self, event: CanaryChanged, wait_s: float = 2.0) -> None:
        """Wait (bounded) for the core's next step to apply ``event``: the runtime answers an
        ingest when it is recorded, and the step that applies it follows at once."""
        for _ in range(int(wait_s / 0.01)):
            c = self.runtime.snapshot().canaries.get(event.model_key)
            if c is not None and c.reason.endswith(event.reason):
                return
            await asyncio.sleep(0.01)

    def state(self, name: str) -> dict[str, Any]:
        """The model's canary as the running core sees it; ``state`` "none" when it never had
        one. NotFound for a model name never registered."""
        self.runtime  # noqa: B018 - 503 without one
        self._versions(name)
        view = self._view(name)
        return view if view is not None else {"model": name, "state": "none"}

    def _view(self, name: str) -> dict[str, Any] | None:
        mine = [c for k, c in self.runtime.snapshot().canaries.items()
                if k.rpartition(":")[0] == name]  # fmt: skip
        if not mine:
            return None
        c = max(mine, key=lambda c: c.changed_at)
        out = asdict(c)
        out["model"], out["fraction"] = name, c.fraction_ppm / PPM
        out["draining"] = list(c.draining)
        return out

    def _versions(self, name: str) -> dict[str, str]:
        with session_scope(self._factory) as session:
            rows = session.execute(select(m.ServedModel.version, m.ServedModel.status)
                                   .where(m.ServedModel.name == name)).all()  # fmt: skip
        if not rows:
            raise NotFound("model", name)
        return {str(v): str(s) for v, s in rows}

    def _baseline(self, name: str, version: str, baseline: str | None) -> str:
        versions = self._versions(name)
        if version not in versions:
            raise ValidationError("version", version, f"model {name!r} has no such version")
        if baseline is not None:
            if baseline not in versions:
                raise ValidationError("baseline_version", baseline,
                                      f"model {name!r} has no such version")  # fmt: skip
            if baseline == version:
                raise ValidationError("baseline_version", baseline, "must differ from version")
            return baseline
        others = sorted(v for v, s in versions.items() if v != version and s == "active")
        if len(others) != 1:
            raise ValidationError("baseline_version", None, f"name the baseline: model {name!r} "
                                  f"has {len(others)} other active versions")  # fmt: skip
        return others[0]
