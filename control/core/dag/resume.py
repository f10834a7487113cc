"""Resuming a run an earlier process left open: the steps it completed are done, not run.

:func:`replay` drives a fresh ``DagRun`` through the completions recorded before the crash,
in dependency order, as if their steps had just come back (no device: their outputs are the
runtime's, at hand). It returns the steps that are still to run: nodes made ready along the
way whose step (or one of whose chunks) was not completed. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable

from control.core.dag.run import DagRun, StepRef
from control.core.types import DoneStep


def replay(run: DagRun, done: Iterable[DoneStep]) -> list[StepRef]:
    """Mark ``done`` complete in ``run``; returns the steps taken that still have to run
    (the caller queues them). A completion of a node the run never reaches is ignored."""
    left = {(d.node_id, d.chunk): d for d in done}
    pending: list[StepRef] = []
    while left and not run.ended and any(n == key[0] for n in run.ready() for key in left):
        for ref in run.take_ready():
            d = left.pop((ref.node_id, ref.chunk), None)
            if d is None:
                pending.append(ref)
                continue
            run.on_step_done(ref.key, None, None, d.route_label, d.item_count)
    return [ref for ref in pending if ref.key in run.live]
