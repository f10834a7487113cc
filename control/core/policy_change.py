"""A running core takes new policies (``PoliciesChanged``) without a restart.

What changes at once: the batching strategy and its config (delay, size rule), the routing
strategy and its config, the tenancy half's fair-share policy, and every other knob of
``CoreConfig`` the phases read from ``Policies.config`` when they run (stealing, transfer costs,
binding, capacity admission, preloading, scale-to-zero, retry and recompute bounds; the prefix
cache size of replicas loaded from then on; the step order of steps ready from then on). Work in
flight is kept: queued steps stay queued (re-filed in the new fair-share order), running batches
run on, and every replica is marked for a new batching decision at the next step, so a shorter
delay dispatches what already waited.

A strategy whose name and config are unchanged is kept as it is, with what it learnt (the
adaptive batching caps). Two knobs size structures made when the core starts and are refused
here (``FIXED_AT_START``). The change is checked in whole before anything is applied: a bad
name or config raises (ValueError/TypeError naming it) and the core is as it was.
"""

from __future__ import annotations

from control.core.batching.registry import make_batching
from control.core.cluster import Cluster
from control.core.context import CoreConfig, Policies
from control.core.events import PoliciesChanged
from control.core.parts import ActionLog, Queues
from control.core.routing.registry import make_routing

#: CoreConfig fields that size what the core builds at start; a change needs a restart.
FIXED_AT_START = ("request_ids_kept_s", "finished_runs_kept")


def apply_policies(
    pol: Policies, queues: Queues, cluster: Cluster, log: ActionLog, event: PoliciesChanged,
    now: float,
) -> None:  # fmt: skip
    """Apply ``event`` to the core's policies (the module doc); all or nothing. Changes
    ``pol``, re-files ``queues``' pending steps and marks every replica of ``cluster`` dirty."""
    new = event.config
    if not isinstance(new, CoreConfig):
        raise TypeError(f"PoliciesChanged.config must be a CoreConfig, got {type(new).__name__}")
    old = pol.config
    for name in FIXED_AT_START:
        if getattr(old, name) != getattr(new, name):
            raise ValueError(
                f"{name} is fixed when the core starts ({getattr(old, name)!r}); "
                f"a change to {getattr(new, name)!r} needs a restart"
            )
    batching = pol.batching
    if (new.batching, new.batching_config) != (old.batching, old.batching_config):
        batching = make_batching(new.batching, new.batching_config)
    routing = pol.routing
    if (new.routing, new.routing_config) != (old.routing, old.routing_config):
        routing = make_routing(new.routing, new.routing_config)
    if event.fair_share is not None:
        swap = getattr(pol.tenancy, "set_fair_share", None)
        if swap is None:
            raise TypeError(f"{type(pol.tenancy).__name__} cannot change its fair-share policy")
        swap(event.fair_share, event.fair_share_config, now)  # raises before it changes
        for queue in queues.pending.values():
            queue.rekey(pol.tenancy)
    pol.config, pol.batching, pol.routing = new, batching, routing
    pol.take_ahead_s = new.binding.take_ahead_us / 1e6
    pol.dispatch_ahead_s = new.binding.dispatch_ahead_us / 1e6
    pol.critical_path = new.step_order == "critical_path"
    queues.dirty.update(cluster.replicas)
    log.counters["policies.changed"] += 1
