"""Ending runs for the actuator: ``Reject`` and ``RunFinished`` resolve the caller's
``RunHandle`` (a finished run's outputs fetched first), and what a finished run held (its
payload, its outputs here and on the executor) is released.

Settling decides nothing: the status is the core's, except that a successful run whose outputs
cannot be fetched (lost with their worker) ends ``failed`` naming why.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from control.clock import SYSTEM_CLOCK, Clock
from control.core.actions import Reject, RunFinished
from control.executor.protocol import Executor
from control.runtime import mapping
from control.runtime.completions import Completions, call_now
from control.runtime.metrics import RuntimeMetrics
from control.runtime.outputs import OutputFetch
from control.runtime.state import RunState
from control.runtime.types import RunResult


class RunEnds:
    """Resolves the handles of runs the core ended and releases what they held.

    ``stores`` holds the runs' payloads and host-tool outputs (released here with the run);
    ``spawn`` runs a task the runtime cancels at stop; ``later(fn, *args)`` runs bookkeeping
    that need not precede the caller's answer (metrics, releases). A run's wall time is read
    from ``clock`` (the one its submission time came from)."""

    def __init__(
        self,
        executor: Executor,
        completions: Completions,
        runs: dict[str, RunState],
        stores: mapping.Stores,
        metrics: RuntimeMetrics,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        *,
        later: Callable[..., None] = call_now,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.ex = executor
        self.done = completions
        self.runs = runs
        self.stores = stores
        self.metrics = metrics
        self.spawn = spawn
        self.later = later
        self.clock = clock

    def reject(self, a: Reject, now: float) -> None:
        run = self.runs.pop(a.request_id, None)
        self.stores.payloads.pop(a.request_id, None)
        if run is not None:
            self.metrics.run_done(run.request.workflow, "rejected", now - run.submitted_at)
            run.timeline.decide({"kind": "admission", "verdict": "rejected", "reason": a.reason,
                                 "at_ms": round((now - run.submitted_at) * 1000, 3)})  # fmt: skip
            timeline = run.timeline.as_dict((now - run.submitted_at) * 1000)
            run.handle.resolve(RunResult(a.request_id, "rejected", {}, a.reason, a.reason, (),
                                         a.retry_after_s, timeline=timeline))  # fmt: skip

    def finished(self, a: RunFinished, now: float) -> None:
        """Settle the run now when its outputs are at hand (the common case: a worker's output
        came back with its result); otherwise once the fetches from its workers return."""
        if a.status != "succeeded":
            return self._settle_run(a, {}, a.error)
        try:
            fetch = OutputFetch(a.outputs, self.stores, self.ex)
            outputs = fetch.values() if fetch.ready else None
        except Exception as err:  # an output lost with its worker: the run fails, loop lives
            return self._settle_run(a, {}, f"output unavailable: {err}")
        if outputs is None:
            return self.spawn(self._settle_later(a, fetch))
        self._settle_run(a, outputs, a.error)

    async def _settle_later(self, a: RunFinished, fetch: OutputFetch) -> None:
        try:
            outputs, error = await fetch.wait(), a.error
        except Exception as err:
            outputs, error = {}, f"output unavailable: {err}"
        self._settle_run(a, outputs, error)

    def _settle_run(self, a: RunFinished, outputs: dict[str, Any], error: str | None) -> None:
        """Release everything the run held and resolve its handle (its end reaches the caller)."""
        run = self.runs.pop(a.request_id, None)
        status = a.status if error is None or a.status != "succeeded" else "failed"
        if status != "succeeded":
            outputs = {}
        self.later(self._release, a.request_id)  # nothing reads a finished run's leftovers
        if run is None:
            return
        wall_s = self.clock.monotonic() - run.submitted_at
        self.later(self.metrics.run_done, run.request.workflow, status, wall_s)
        fault, field = (a.fault, a.field) if status == "failed" else (None, None)
        result = RunResult(a.request_id, status, outputs, error, a.reason, tuple(run.usage),
                           None, fault, field, tuple(run.reissued),
                           run.timeline.as_dict(wall_s * 1000))  # fmt: skip
        run.handle.resolve(result)

    def _release(self, run_id: str) -> None:
        """Drop what a finished run left: its outputs on the executor and here, its payload."""
        self.ex.release_run(run_id)
        self.stores.payloads.pop(run_id, None)
        host_outputs = self.stores.host_outputs
        for key in [k for k in host_outputs if k[0] == run_id]:
            del host_outputs[key]
        exec_held = self.done.exec_held
        for key in [k for k in exec_held if k[0] == run_id]:
            exec_held.discard(key)
