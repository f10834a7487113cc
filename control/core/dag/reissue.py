"""Reissuing an attempt under a fresh idempotency key, and the key its bill goes under.

Every other retry of a step keeps its node's idempotency key: the executor runs a key once, so
a retry of an attempt that may still be running waits for that attempt's result (exactly once,
billed once). Two retries must not wait for it:

* a timeout (``step_timeouts``): the node's ``timeout_s`` bounds its latency, so the retry runs
  at once elsewhere; the late original result is discarded;
* a headroom preemption (``headroom_preempt``): the attempt was sent to a replica and had not
  started; it is taken back (the driver cancels it, best effort) and requeued for another one.

Such a retry runs under ``<node key>~f<attempt>``, a key no other attempt has, so the executor
runs it whatever became of the original. Both attempts' bills go under one key
(:func:`billing_key`: the fresh suffix stripped), so whichever succeeds first is billed and the
other never is.
"""

from __future__ import annotations

from dataclasses import replace

from control.core.dag.run import DagRun
from control.core.dag.step import StepRef

#: What separates a node's idempotency key from a fresh attempt's number.
FRESH = "~f"


def reissue(run: DagRun, key: str, counted: bool, error: str) -> StepRef | None:
    """The next attempt of the live step ``key`` under a fresh idempotency key. ``counted``:
    it is one of the node's ``retries`` (a timeout), and when they are used up the run fails
    (None); otherwise (a preemption) it is spared, as a lost input's retry is. None and no
    change for a key that is not live or a run that ended."""
    step = run.live.get(key)
    if step is None or run.ended:
        return None
    node = run.dag.nodes[step.node_id]
    spared = step.spared + (0 if counted else 1)
    if counted and step.attempt - step.losses - step.spared > node.retries:
        run.on_step_failed(key, error)  # fails the run: the node's retries are used up
        return None
    del run.live[key]
    nxt = run._new_step(node, step.chunk, step.attempt + 1, step.losses, step.recompute, spared)
    fresh = replace(nxt, idempotency_key=f"{billing_key(nxt.idempotency_key)}{FRESH}{nxt.attempt}")
    run.live[fresh.key] = fresh
    return fresh


def billing_key(idempotency_key: str) -> str:
    """The key a step's bill goes under: its idempotency key without a fresh attempt's
    suffix (every attempt of a node chunk shares it, so only the first success is billed)."""
    base, sep, tail = idempotency_key.rpartition(FRESH)
    return base if sep and tail.isdigit() else idempotency_key
