"""Attempts the core abandoned for a fresh one: a timed-out step retried at once elsewhere, a
step taken back from borrowed headroom (``StepRetried`` with ``cause="timeout"``,
``StepPreempted``). Carried out here: the abandoned attempt is cancelled on the executor (best
effort: an item not started yet comes back ``cancelled``; one running finishes and its result is
discarded by the core and billed once, see ``Completions.first_bill``), the preemption is
counted (``legato_preemptions_total`` per priority class and tenant), and the run's record notes
the step (``RunState.reissued``, stored with the request's result as ``reissued``).
"""

from __future__ import annotations

import logging

from control.core.actions import StepPreempted, StepRetried
from control.executor.protocol import Executor
from control.runtime.completions import Completions
from control.runtime.metrics import RuntimeMetrics
from control.runtime.state import RunState

log = logging.getLogger(__name__)


class Reissues:
    """The actuator's handlers of abandoned attempts; decides nothing."""

    def __init__(self, executor: Executor, completions: Completions,
                 runs: dict[str, RunState], metrics: RuntimeMetrics) -> None:  # fmt: skip
        self.ex, self.done, self.runs, self.metrics = executor, completions, runs, metrics

    def retried(self, a: StepRetried, now: float) -> None:
        """A retry under a fresh key (a timeout): cancel the original, note it on the run."""
        if a.cause != "timeout":
            return  # a retry under the same key: bookkeeping inside the core
        log.info("%s: %s", a.failed_key, a.reason)
        self._cancel(a.failed_key)
        self._note(a.failed_key, a.new_key, "timeout", a.reason)

    def preempted(self, a: StepPreempted, now: float) -> None:
        """A step taken back from borrowed headroom: count it, cancel it when it had been sent
        to a worker, note it on the run."""
        log.info("preempted %s on %s (%s, %s): %s", a.key, a.replica_id, a.tenant_id,
                 a.priority_class, a.reason)  # fmt: skip
        self.metrics.preempted(a.priority_class, a.tenant_id)
        if a.dispatched:
            self._cancel(a.key)
        self._note(a.key, a.new_key, "preempted", a.reason)

    def _cancel(self, step_key: str) -> None:
        keys = [
            item.idempotency_key
            for pb in self.done.pending.values()
            for item in pb.items.values()
            if item.key == step_key and item.key not in pb.results
        ]
        cancel = getattr(self.ex, "cancel", None)  # an executor without cancel: results ignored
        if keys and cancel is not None:
            cancel(keys)

    def _note(self, key: str, new_key: str, cause: str, reason: str) -> None:
        """Step keys are ``<run id>/<node>[#chunk][~r<n>]/<attempt>`` (``DagRun``)."""
        run_id, _, rest = key.rpartition("/")[0].rpartition("/")
        run = self.runs.get(run_id)
        if run is not None:
            node = rest.split("#")[0].split("~")[0]
            run.reissued.append({"node": node, "attempt_key": key, "requeued_as": new_key,
                                 "cause": cause, "reason": reason})  # fmt: skip
