"""Watching a rolled-out plan: the p50/p99 observed live over the next window, beside the
twin's prediction, a flag when they disagree, and an automatic rollback where enabled.

``PlanObserver.watch(plan_id)`` is started (as an asyncio task on the gateway's loop) by the
rollout route. It waits until the live runtime reports the plan's rollout ``completed``
(it gives up, recording why, when the rollout aborts or fails or another rollout replaces it),
then waits ``window_s`` and reads the requests that ended successfully in that window
(``finished_at - received_at`` from the requests table). It stores ``observation`` with the
plan: observed p50/p99 and count, the predicted ones (the plan's stored simulation), the
twin's published p99 error (the newest fidelity report; 0 when none is stored, and it says
so), the margin and the judgement of :func:`control.core.placement.outcome.judge_outcome`;
``flagged`` is set when the observed p99 exceeds the bound. A flagged plan whose
``auto_rollback`` (or, when the plan leaves it unset, the setting) is on is rolled back
through :class:`~control.services.rollout.RolloutService` (audited as a rollback by
``system:plan-observer``). Every write is audited; the watch never raises (a control loop
logs and goes on). A gateway restarted during the window does not resume the watch.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.core.placement.outcome import judge_outcome
from control.services.fidelity_reports import FidelityReportService, NoFidelityReport
from control.services.placement import PlacementPlanService
from control.services.rollout import RolloutService
from db import models as m
from db.session import session_scope
from sim.stats import percentile

log = logging.getLogger("control.services.plan_observer")
ACTOR = "system:plan-observer"
_ENDED = ("aborted", "failed")


@dataclass(frozen=True)
class PlanWatchConfig:
    """The observer's settings (``LEGATO_PLAN_*``, see ``control.api.plan_settings``)."""

    window_s: float = 300.0  # how long after a completed rollout latency is observed
    margin: float = 0.2  # fraction of the predicted p99 allowed beyond the twin's own error
    auto_rollback: bool = False  # roll a flagged plan back (a plan's own field wins)
    poll_s: float = 0.5  # how often the rollout's progress is read while it runs
    max_rollout_s: float = 3600.0  # a rollout still running after this is no longer watched


def observed_latency(session: Session, since: datetime, until: datetime) -> dict[str, Any]:
    """p50/p99 end-to-end seconds of the requests that succeeded in [since, until)."""
    q = select(m.Request.received_at, m.Request.finished_at).where(
        m.Request.status == "succeeded", m.Request.finished_at >= since,
        m.Request.finished_at < until, m.Request.received_at >= since,
    )  # fmt: skip
    e2e = sorted((end - start).total_seconds() for start, end in session.execute(q))
    return {"p50_s": percentile(e2e, 50), "p99_s": percentile(e2e, 99), "requests": len(e2e)}


class PlanObserver:
    """Watches rollouts (see the module docstring)."""

    def __init__(
        self, factory: sessionmaker[Session], rollouts: RolloutService, config: PlanWatchConfig,
        clock: Callable[[], datetime] = utcnow,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    ) -> None:  # fmt: skip
        self._factory = factory
        self._rollouts = rollouts
        self._config = config
        self._clock = clock
        self._sleep = sleep
        self._plans = PlacementPlanService(factory, clock)
        self._fidelity = FidelityReportService(factory, clock)

    async def watch(self, plan_id: int) -> None:
        """Observe ``plan_id`` after its rollout; never raises."""
        try:
            if await self._completed(plan_id):
                await self._observe(plan_id)
        except Exception:  # noqa: BLE001 - a control loop logs and goes on
            log.exception("watching placement plan %s failed", plan_id)

    async def _completed(self, plan_id: int) -> bool:
        """True once the plan's rollout completed; False (recorded) when it ended otherwise,
        was replaced by another, or ran past ``max_rollout_s``."""
        waited, seen, why = 0.0, False, "still rolling out after max_rollout_s"
        while waited < self._config.max_rollout_s:
            ro = self._rollouts.runtime.snapshot().rollout
            mine = ro is not None and ro.plan_id == str(plan_id)
            if mine and ro.state == "completed":
                return True
            if mine and ro.state in _ENDED:
                why = f"rollout {ro.state}: {ro.reason}"
                break
            if seen and not mine:
                why = "replaced by another rollout before it completed"
                break
            seen = seen or mine  # the runtime may show the rollout a moment after the ingest
            await self._sleep(self._config.poll_s)
            waited += self._config.poll_s
        self._plans.update(ACTOR, plan_id, observation={"state": "abandoned", "reason": why})
        return False

    async def _observe(self, plan_id: int) -> None:
        cfg = self._config
        start = self._clock()
        self._plans.update(ACTOR, plan_id, observation={"state": "observing",
                           "since": start.isoformat(), "window_s": cfg.window_s})  # fmt: skip
        await self._sleep(cfg.window_s)
        end = self._clock()
        with session_scope(self._factory) as session:
            seen = observed_latency(session, start, end)
        plan = self._plans.get(plan_id)
        predicted = ((plan.simulation or {}).get("plan") or {}) if (plan.simulation or {}).get(
            "state") == "done" else {}  # fmt: skip
        error, error_source = self._twin_error()
        outcome = judge_outcome(predicted.get("p99_s"), seen["p99_s"], error, cfg.margin)
        auto = cfg.auto_rollback if plan.auto_rollback is None else plan.auto_rollback
        observation = {
            "state": "observed", "since": start.isoformat(), "until": end.isoformat(),
            "window_s": cfg.window_s, "observed": seen,
            "predicted": {"p50_s": predicted.get("p50_s"), "p99_s": predicted.get("p99_s")},
            "twin_p99_error": error, "twin_error_source": error_source, "margin": cfg.margin,
            "bound_p99_s": outcome.bound_s, "reason": outcome.reason,
            "auto_rollback": auto, "rolled_back": bool(outcome.flagged and auto),
        }  # fmt: skip
        self._plans.update(ACTOR, plan_id, observation=observation, flagged=outcome.flagged)
        if outcome.flagged and auto:
            await self._rollouts.rollback(ACTOR, plan_id)

    def _twin_error(self) -> tuple[float, str]:
        try:
            report = self._fidelity.latest()
        except NoFidelityReport:
            return 0.0, "no fidelity report stored: error taken as 0"
        return float(report.p99_error), f"fidelity report {report.id}"
