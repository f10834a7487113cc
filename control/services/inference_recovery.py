"""Runs an earlier process left open, on the gateway's start: resumed, or failed retryably.

A run is resumed when its inputs were recorded with its accept, its workflow is in the live
catalog and it was received at most ``resume_max_age_s`` ago (0 turns resuming off): its row
goes back to ``queued`` and it is handed to the runtime under its own request id and its
client's idempotency key, so its steps' idempotency keys are those of the first run and the
ledger's ``(request, node, attempt)`` key drops every step billed before the crash. Any other
open run is failed with :data:`~control.services.run_records.RESTART_FAILURE`, which a repeat
of its idempotency key (same body) overrides by reopening the request: it runs again under its
own request id, so the ledger drops every step billed before the restart, and the steps it
completed before (kept for ``KEPT_STEPS_MAX_AGE_S``) are handed to the rerun as done, as a
resumed run's are: they are neither run nor billed again.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from control.runtime.types import KeptOutput
from control.services.inference_calls import RunCall
from control.services.run_records import RESTART_FAILURE
from control.store.runlog import recovery
from db.session import session_scope

log = logging.getLogger(__name__)

#: Default of ``resume_max_age_s``: a run older than this is failed, not resumed (its client
#: has long given up; a retry with its key runs it again).
RESUME_MAX_AGE_S = 3600.0
#: How long the kept steps of a run failed by a restart wait for a repeat of its key; after
#: that the repeat runs every step again (the ledger still bills each step once).
KEPT_STEPS_MAX_AGE_S = 24 * 3600.0


class RecoveryMixin:
    """The recovery half of :class:`~control.services.inference.InferenceService`."""

    factory: Any
    writer: Any
    catalog: Any
    resume_max_age_s: float
    recovered: list[str]
    resumed: list[str]
    clock: Any
    #: the kept steps of each run reopened by a repeat of its key, until its rerun starts
    _reopened: dict[str, tuple[KeptOutput, ...]]

    def _recover(self, now: datetime) -> list[recovery.OpenRun]:
        """(db thread) Requeue the open runs that can be resumed, fail the others; returns
        those to resume, oldest first. ``recovered`` is set to the failed ones' ids."""
        with session_scope(self.factory) as session:
            found = recovery.open_runs(session, received_before=now)
            resume = [run for run in found if self._resumable(run, now)]
            failed = [run.record.id for run in found if run not in resume]
            recovery.requeue(session, [run.record.id for run in resume])
            resume = recovery.with_steps(session, resume)
            recovery.fail(session, failed, error=RESTART_FAILURE, finished_at=now,
                          keep_since=now - timedelta(seconds=KEPT_STEPS_MAX_AGE_S))  # fmt: skip
        if failed:
            log.warning("failed %d run(s) an earlier process left open (retryable)", len(failed))
        if resume:
            log.warning("resuming %d run(s) an earlier process left open", len(resume))
        self.recovered = failed
        self.resumed = [run.record.id for run in resume]
        return resume

    async def _reopen(self, found: Any, inputs: dict[str, Any]) -> Any:
        """A repeat of the key of ``found``, a run failed by a restart: reopened to run again
        under its own request id (so no step billed before the restart is billed again),
        its kept steps noted in ``_reopened`` for :meth:`_reopened_steps`; None when another
        repeat reopened it first."""
        keep_since = self.clock.utcnow() - timedelta(seconds=KEPT_STEPS_MAX_AGE_S)

        def reopen() -> list[dict[str, Any]] | None:
            with session_scope(self.factory) as session:
                return recovery.reopen(session, found, error=RESTART_FAILURE, inputs=inputs,
                                       keep_since=keep_since)  # fmt: skip

        steps = await self.writer.run_in_db_thread(reopen)  # type: ignore[attr-defined]
        if steps is None:
            return None
        self._reopened[found.id] = tuple(kept_output(step) for step in steps)
        return replace(found, status="queued", error=None, finished_at=None, started_at=None,
                       first_token_at=None, result=None)  # fmt: skip

    def _reopened_steps(self, request_id: str) -> tuple[KeptOutput, ...]:
        """The steps a reopened run completed before the restart (taken once; () for any
        other run): its rerun gets them as done."""
        return self._reopened.pop(request_id, ())

    def _resumable(self, run: recovery.OpenRun, now: datetime) -> bool:
        record = run.record
        if run.inputs is None or self.resume_max_age_s <= 0:
            return False
        if (now - record.received_at).total_seconds() > self.resume_max_age_s:
            return False
        return self.catalog.has_workflow(f"{record.workflow_name}:{record.workflow_version}")

    def _resume(self, run: recovery.OpenRun) -> None:
        """(loop) Hand a requeued run to the runtime again, as it was first submitted."""
        record, inputs = replace(run.record, status="queued", started_at=None), run.inputs
        assert inputs is not None
        call = RunCall(
            tenant_id=record.tenant_id, tenant_name=inputs["tenant_name"], actor="recovery",
            workflow_name=record.workflow_name, workflow_version=record.workflow_version,
            payload=inputs["payload"], body_hash=record.body_hash,
            idempotency_key=inputs["idempotency_key"], priority_class=record.priority_class,
            max_output_tokens=inputs["max_output_tokens"], session_id=inputs["session_id"],
            sampling=inputs["sampling"] or {},
        )  # fmt: skip
        key = f"{record.workflow_name}:{record.workflow_version}"
        done = tuple(kept_output(step) for step in run.steps)
        self._start(call, key, record, done)  # type: ignore[attr-defined]


def kept_output(row: dict[str, Any]) -> KeptOutput:
    """A ``run_steps`` row as the runtime takes a completed step."""
    chunk = None if row["chunk"] < 0 else row["chunk"]
    return KeptOutput(row["node_id"], chunk, row["route_label"], row["item_count"], row["output"])
