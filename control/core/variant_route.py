"""Apply the variant choice (``variant_choice``) to a step being routed.

Called from ``lifecycle.served_key`` for a node whose base model has precision variants in the
catalog (``Catalog.variants``). Reads the cluster (which options have replicas, their predicted
queue delay) and the tenant's quality preferences (``Policies.tenant_quality``); sets
``step.variant`` to the decision and returns the key that serves the step.
"""

from __future__ import annotations

from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.parts import Catalog, Queues
from control.core.routing.adapters import step_adapter
from control.core.state import QueuedStep
from control.core.variant_choice import VariantOption, choose


def quality_of(pol: Policies, step: QueuedStep) -> tuple[str, bool]:
    """(quality class, tenant allows degrading) of the step's request."""
    req = step.run.request
    tenant_quality, allow = pol.tenant_quality.get(req.tenant_id, (None, False))
    cfg = pol.config.variants
    quality = req.quality or tenant_quality or cfg.class_quality.get(req.priority_class)
    return quality or "balanced", allow


def predicted_wait_us(cluster: Cluster, queues: Queues, key: str, now: float) -> tuple[bool, int]:
    """(has a replica taking work, predicted queue delay of a new step there in us): the least
    loaded replica's wait plus an even share of the model's pending work."""
    reps = cluster.serving(key)
    if not reps:
        return False, 0
    pending = queues.pending.get(key)
    share = pending.us // len(reps) if pending is not None else 0
    return True, min(r.wait_us(now) for r in reps) + share


def choose_for_step(
    pol: Policies, catalog: Catalog, cluster: Cluster, queues: Queues, step: QueuedStep,
    now: float,
) -> str:  # fmt: skip
    """The model key that serves ``step`` (its node's base model or one of its variants). A
    step with a LoRA adapter runs on the base: adapters are trained on, and loaded onto, the
    base model's own weights."""
    base = step.node.model or ""
    if step_adapter(step):
        return base
    options = []
    for key in (base, *catalog.variants.get(base, ())):
        spec = catalog.models.get(key)
        if spec is None:
            continue
        placed, wait = predicted_wait_us(cluster, queues, key, now)
        score = 1.0 if key == base else spec.quality_score
        options.append(VariantOption(key, spec.precision, score, spec.memory_mib, placed, wait,
                                     is_base=key == base))  # fmt: skip
    if not options:
        return base
    quality, allow = quality_of(pol, step)
    decision = choose(pol.config.variants, quality, allow, options)
    step.variant = decision
    return decision.ran
