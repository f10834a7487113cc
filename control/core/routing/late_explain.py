"""Why a late-bound step went where it went: the routing policy's scores of every replica of
its model at the moment of binding, kept on the step (``QueuedStep.route``) for the request
timeline.

Late binding hands a parked step to a replica with room when its turn comes in fair-share order.
When only one replica has room, or every replica with room starts a full batch, which room it
takes changes no one's wait, so the core does not score the replicas to decide. An operator
asking "why this replica, and what did the others look like" still wants the comparison, so
with ``BindingConfig.explain`` (on in the live runtime; the twin leaves it off, as it costs a
routing evaluation per bound step) the replicas are scored after the fact. The bind stands
whatever the scores say: this is an explanation, never a decision.
"""

from __future__ import annotations

from collections.abc import Sequence

from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.parts import Queues
from control.core.routing.base import (
    Candidate,
    RouteChoice,
    RoutingContext,
    RoutingPolicy,
    StepDemand,
)
from control.core.state import QueuedStep, ReplicaRecord
from control.core.step_demand import demand_of


def explain_bind(
    pol: Policies, cluster: Cluster, queues: Queues, step: QueuedStep, target: ReplicaRecord,
    now: float,
) -> None:  # fmt: skip
    """Set ``step.route`` to the explanation of binding it late to ``target`` (see the module
    docstring); the caller has already chosen ``target`` and goes on regardless."""
    ctx = queues.routing_context(
        now, pol.latency, pol.config.transfer, pol.config.prefix_block_tokens
    )
    serving = cluster.serving(target.model.key)
    step.route = explain_late_bind(pol.routing, demand_of(step), target, serving, ctx)


def explain_late_bind(
    routing: RoutingPolicy, demand: StepDemand, target: Candidate,
    serving: Sequence[Candidate], ctx: RoutingContext,
) -> RouteChoice | None:  # fmt: skip
    """The decision record of binding a step with ``demand`` to ``target``: ``target``'s own
    score, and the best-scored of ``serving`` (every replica of the model) as candidates.
    None when the policy scores nothing (it has no candidates)."""
    own = routing.choose(demand, [target], ctx)
    if own is None:
        return None
    others = routing.choose(demand, serving, ctx) if len(serving) > 1 else own
    best = others.score.replica_id if others is not None else target.replica_id
    why = (
        f"bound late to {target.replica_id}, a replica with room when the step's turn came in "
        "fair-share order (which room it took changed no one's wait)"
    )
    if best != target.replica_id:
        why += f"; scored after the fact, {best} would have finished it sooner"
    candidates = others.candidates if others is not None else own.candidates
    return RouteChoice(own.score, False, why, candidates)
