"""Recording canary transitions the core decided (automatic rollbacks above all) in the audit
log. The live runtime hands every ``CanaryTransition`` (beside each ``RolloutTransition``) to
its ``on_rollout`` callback; :func:`transitions_to` splits the two kinds between their
recorders. The writes run on one worker thread, in arrival order, never on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.clock import utcnow
from control.core.actions import CanaryTransition
from control.services.audit import write_audit
from control.services.canary import ENTITY
from db.session import session_scope

log = logging.getLogger("control.services.canary")

SYSTEM_ACTOR = "system:canary"


class CanaryRecorder:
    """Audits each canary transition (``record``: the actuator's hook, loop thread, never
    blocks); ``pending``: the writes queued and not yet known done."""

    def __init__(
        self, factory: sessionmaker[Session], clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._factory = factory
        self._clock = clock
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="canary-audit")
        self.pending: list[Future] = []

    def record(self, t: CanaryTransition) -> None:
        self.pending = [f for f in self.pending if not f.done()]
        self.pending.append(self._writer.submit(self._write, t))

    def _write(self, t: CanaryTransition) -> None:
        after = {"canary_key": t.canary_key, "from": t.from_state, "to": t.to_state,
                 "fraction_ppm": t.fraction_ppm, "reason": t.reason,
                 "figures": dict(t.figures)}  # fmt: skip
        try:
            with session_scope(self._factory) as session:
                write_audit(session, at=self._clock(), actor=SYSTEM_ACTOR,
                            action=f"canary:{t.to_state}", entity_type=ENTITY,
                            entity_id=t.model_key, before=None, after=after)  # fmt: skip
        except Exception:  # a bookkeeping failure must not stop later transitions
            log.exception("could not record canary transition %r", t)


def transitions_to(
    on_rollout: Callable[[Any], None], on_canary: Callable[[CanaryTransition], None]
) -> Callable[[Any], None]:
    """The runtime's one transition hook, handing canary transitions to ``on_canary`` and
    everything else (rollout transitions) to ``on_rollout``."""

    def hand(t: Any) -> None:
        (on_canary if isinstance(t, CanaryTransition) else on_rollout)(t)

    return hand
