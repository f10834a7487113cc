"""Lineage recovery: recomputing step outputs lost with the worker that held them.

A step's output lives only in the worker that made it. When a step fails because one of its
inputs is gone (``is_input_loss``), the step that made that input is run again (a
*recomputation*) and the consumer is parked until every input it lost exists again; then it is
retried, and that retry is ``spared``: it does not count against the node's ``retries`` (the
consumer did nothing wrong). A recomputation is a step like any other (its own retries, its own
device losses); one that finds its own inputs lost recurses the same way, so recovery is
transitive.

Keys: recomputation ``g`` of an output runs under the idempotency key ``<base>/<node>~r<g>``, a
key no earlier attempt had, so the executor's idempotency store cannot replay the lost attempt
and the ledger (one entry per idempotency key) bills the recomputation once and the lost attempt
never twice. Its attempt numbers start at ``RECOMPUTE_ATTEMPTS * g + 1`` (the offset counted as
``spared``, so the node's ``retries`` still apply to it), so they never repeat an earlier
attempt's either (the ledger holds one entry per request, node and attempt). ``max_recomputes`` bounds the recomputations of one run: a step that keeps killing
its worker cannot loop; past the bound the run fails naming the consumer node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from control.core.dag.spec import INPUT_NODE
from control.core.dag.step import TERMINAL, NodeState, StepRef

if TYPE_CHECKING:
    from control.core.dag.run import DagRun

#: one output of a run: (node id, chunk) where chunk is None for a node made by one step
Output = tuple[str, int | None]

#: attempt numbers set aside per recomputation generation (more than any node's retries)
RECOMPUTE_ATTEMPTS = 1000

#: how the executor and the runtime word an item that failed for a lost input
_LOSS_PREFIXES = ("input lost", "input unavailable", "no worker holds output")


def is_input_loss(error: str | None, fault: str | None = None) -> bool:
    """Whether a failed item failed because an input it needed is gone (not its own fault)."""
    if error is None or fault == "bad_input":
        return False
    return error.startswith(_LOSS_PREFIXES)


@dataclass
class _Parked:
    """A consumer waiting for recomputed inputs: its next attempt, made once ``waiting`` is
    empty (made then, so its input bindings name where the recomputed outputs now live)."""

    node_id: str
    chunk: int | None
    attempt: int
    losses: int
    recompute: int
    spared: int
    waiting: set[Output] = field(default_factory=set)


class Lineage:
    """The recovery books of one ``DagRun``: outputs being recomputed, parked consumers, the
    last recomputation generation of each output and how many recomputations the run made."""

    def __init__(self) -> None:
        self.recomputes = 0
        self._gen: dict[Output, int] = {}
        self._running: set[Output] = set()
        self._parked: list[_Parked] = []
        self._resumed: list[StepRef] = []

    def take_resumed(self) -> list[StepRef]:
        """Consumer retries whose inputs exist again (handed out once)."""
        out, self._resumed = self._resumed, []
        return out

    def generation(self, out: Output) -> int:
        return self._gen.get(out, 0)

    def recomputed(self, run: DagRun, out: Output) -> None:
        """A recomputation of ``out`` succeeded: release the consumers it was the last wait of."""
        self._running.discard(out)
        still = []
        for p in self._parked:
            p.waiting.discard(out)
            if p.waiting:
                still.append(p)
                continue
            node = run.dag.nodes[p.node_id]
            self._resumed.append(
                run._new_step(node, p.chunk, p.attempt, p.losses, p.recompute, p.spared)
            )
        self._parked = still


def lost_outputs(run: DagRun, step: StepRef, lost: tuple[Output, ...] | None) -> list[Output]:
    """The outputs of other steps that ``step`` reads, as (node, chunk); only those in ``lost``
    when the executor named them (otherwise all: a recomputation of a live output is waste,
    never wrong). Request inputs are not recomputable and are left out."""
    found: list[Output] = []
    for b in step.inputs:
        for r in b.refs:
            if r.node_id == INPUT_NODE or r.node_id not in run.dag.nodes:
                continue
            out = (r.node_id, r.chunk if run.chunks(r.node_id) > 1 else None)
            if out not in found and (lost is None or out in lost or (r.node_id, None) in lost):
                found.append(out)
    return found


def _moved(run: DagRun, step: StepRef) -> set[Output]:
    """The outputs ``step`` reads that now live elsewhere than its bindings say (recomputed
    since it was bound)."""
    moved: set[Output] = set()
    for b in step.inputs:
        for r in b.refs:
            locs = run._locs.get(r.node_id)
            if r.node_id == INPUT_NODE or not locs:
                continue
            if locs[(r.chunk or 0) if len(locs) > 1 else 0] != (r.device_id, r.replica_id):
                moved.add((r.node_id, r.chunk if len(locs) > 1 else None))
    return moved


def on_input_lost(
    run: DagRun, key: str, error: str, max_recomputes: int, lost: tuple[Output, ...] | None = None
) -> list[StepRef]:
    """The live step ``key`` failed because an input is gone: park it and return the
    recomputations to run (fresh keys; none for an output already being recomputed). With no
    recomputable input (a request input lost) it is an ordinary failed attempt. Past
    ``max_recomputes`` recomputations in the run, fails the run naming the node. Returns [] and
    changes nothing for a key that is not live. An input recomputed since the step was bound
    is not recomputed again: with nothing left to wait for, the spared retry is returned."""
    if max_recomputes < 0:
        raise ValueError(f"max_recomputes must be >= 0, got {max_recomputes!r}")
    step = run.live.get(key)
    if step is None or run.ended:
        return []
    sources = lost_outputs(run, step, lost)
    if not sources:
        retry = run.on_step_failed(key, error)
        return [retry] if retry is not None else []
    del run.live[key]
    lin = run.lineage
    # an output recomputed since this attempt was bound (e.g. on a DeviceDown) is there again
    waiting = [s for s in sources if s in lin._running or s not in _moved(run, step)]
    fresh = [s for s in waiting if s not in lin._running]
    if lin.recomputes + len(fresh) > max_recomputes:
        run._fail(step, f"lost its input {sources[0][0]!r} and the run reached its recompute "
                        f"limit ({max_recomputes}): {error}")  # fmt: skip
        return []
    if not waiting:  # nothing to wait for: the spared retry, bound to where they live now
        node = run.dag.nodes[step.node_id]
        return [run._new_step(node, step.chunk, step.attempt + 1, step.losses, step.recompute,
                              step.spared + 1)]  # fmt: skip
    lin._parked.append(_Parked(step.node_id, step.chunk, step.attempt + 1, step.losses,
                               step.recompute, step.spared + 1, set(waiting)))  # fmt: skip
    return [_recompute(run, out) for out in fresh]


def _needed(run: DagRun, node_id: str) -> bool:
    """Whether a consumer of ``node_id``'s output may still read it: an out-edge taken (or
    not yet decided) into a node that has not ended, or into one being recomputed."""
    labels, lin = run._labels, run.lineage
    for e in run.dag.out_edges[node_id]:
        if e.when is not None and node_id in labels and labels[node_id] != e.when:
            continue
        if run.state.get(e.target) not in TERMINAL:
            return True
        if any(out[0] == e.target for out in lin._running):
            return True
    return False


def on_device_down(run: DagRun, device_id: str, max_recomputes: int) -> list[StepRef]:
    """``device_id`` is down (its worker, and every output it held, gone): recompute now, under
    fresh keys, each output only it held that a consumer of the run may still read, instead of
    waiting for the consumer to fail on fetch. Producers in reverse order, so a producer whose
    only reader is itself being recomputed is recomputed too (transitively). Outputs already
    being recomputed are left alone; past ``max_recomputes`` nothing more is started (the
    consumer's failure then fails the run with the reason, see ``on_input_lost``)."""
    if max_recomputes < 0:
        raise ValueError(f"max_recomputes must be >= 0, got {max_recomputes!r}")
    if run.ended:
        return []
    lin = run.lineage
    made: list[StepRef] = []
    for node_id in reversed(run.dag.order):
        if node_id == INPUT_NODE or run.state.get(node_id) != NodeState.DONE:
            continue
        locs = run._locs.get(node_id, [])
        if not any(dev == device_id for dev, _ in locs) or not _needed(run, node_id):
            continue
        for i, (dev, _) in enumerate(locs):
            out = (node_id, i if len(locs) > 1 else None)
            if dev != device_id or out in lin._running:
                continue
            if lin.recomputes >= max_recomputes:
                return made
            made.append(_recompute(run, out))
    return made


def _recompute(run: DagRun, out: Output) -> StepRef:
    """The first attempt of the next recomputation generation of ``out``."""
    lin = run.lineage
    lin.recomputes += 1
    lin._gen[out] = gen = lin._gen.get(out, 0) + 1
    lin._running.add(out)
    base = RECOMPUTE_ATTEMPTS * gen
    return run._new_step(run.dag.nodes[out[0]], out[1], base + 1, 0, gen, base)
