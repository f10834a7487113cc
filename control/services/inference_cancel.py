"""Cancel of a run (issue 22, item 4): through the runtime, so that the run stops.

A run of this process is cancelled in the live core (``LiveRuntime.cancel_run``): its queued
steps are dropped, its steps in flight cancelled on the executor, their late results discarded,
and nothing is billed after that (the runtime bills only a run it still holds); its end
(``cancelled``) is recorded by the settle path as any other. A request with no live run here
(left open by an earlier process) is cancelled in the database only. Every cancel is audited
(action ``cancel`` on the ``request``), by the admin or the tenant that asked.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from control.services.errors import Conflict
from control.services.inference_reads import until_ended
from control.services.inference_settle import LiveRun
from control.store import records as rec

#: How long a cancel waits (seconds) for the run's end to be recorded before answering with
#: the run as it stands (the core ends it at its next instant; this is only the write).
CANCEL_WAIT_S = 10.0
ENDED = frozenset({"succeeded", "failed", "rejected"})


class CancelMixin:
    """``cancel`` of :class:`~control.services.inference.InferenceService` (uses its
    ``_live``, ``runtime``, ``services``, ``writer``, ``clock`` and ``get``)."""

    _live: dict[str, LiveRun]
    runtime: Any
    services: Any
    writer: Any
    clock: Any

    get: Callable[[str], Awaitable[rec.RequestRecord]]  # ReadsMixin's

    async def cancel(self, request_id: str, actor: str, reason: str) -> rec.RequestRecord:
        """Cancel ``request_id`` and answer its record (``cancelled``, or ``running`` when its
        end is not written within ``CANCEL_WAIT_S``). Idempotent for a cancelled run; a run
        that ended otherwise raises ``Conflict`` (nothing changes)."""
        record = await self.get(request_id)
        if record.status == "cancelled":
            return record
        if record.status in ENDED:
            raise Conflict(f"request {request_id} already ended ({record.status}): not cancelled")
        live = self._live.get(request_id)
        if live is None:  # no run of this process: the row only
            return await self.writer.run_in_db_thread(
                self.services.requests.retire, actor, request_id
            )
        await self.runtime.cancel_run(request_id, reason)
        await until_ended(live, CANCEL_WAIT_S)
        await self.writer.run_in_db_thread(self._audit_cancel, actor, request_id, reason)
        return await self.get(request_id)

    def _audit_cancel(self, actor: str, request_id: str, reason: str) -> None:
        self.services.audit.record(at=self.clock.utcnow(), actor=actor, action="cancel",
                                   entity_type="request", entity_id=request_id,
                                   after={"status": "cancelled", "reason": reason})  # fmt: skip
