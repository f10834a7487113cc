"""What a workflow run hands out and how far each of its nodes got.

``NodeState`` is the progress of one node of a run; ``StepRef`` is one attempt of one node (one
chunk of a map node), the unit the engine queues, binds and dispatches. ``DagRun``
(``control.core.dag.run``) makes both; the compiled structure of a workflow
(``control.core.dag.compiled``) keeps a fresh run's node states without depending on the run.
"""

from __future__ import annotations

from enum import StrEnum

from control.core.actions import InputBinding
from control.core.values import value


class NodeState(StrEnum):
    WAITING = "waiting"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


#: states a node never leaves
TERMINAL = (NodeState.DONE, NodeState.SKIPPED, NodeState.FAILED)


@value
class StepRef:
    """One attempt of one node (one chunk of a map node) of a run."""

    key: str
    run_id: str
    node_id: str
    chunk: int | None
    attempt: int
    idempotency_key: str
    inputs: tuple[InputBinding, ...]
    #: earlier attempts of this node (chunk) lost with their device; they do not count
    #: against the node's ``retries``
    losses: int = 0
    #: > 0: a recomputation (its generation) of an output lost with its worker
    #: (``control.core.dag.lineage``); it runs under the idempotency key ``...~r<generation>``
    recompute: int = 0
    #: earlier attempts that failed only because an input was lost; not counted either
    spared: int = 0
