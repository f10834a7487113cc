"""Routing around a replica whose circuit breaker is open (``ReplicaBreakerChanged``).

The executor keeps a breaker per replica (:mod:`control.executor.host.breaker`): repeated
failures of the replica's own (the model raised, a batch hung; never a tenant's bad input)
open it, and after a cooldown it lets one batch through, the probe, whose outcome closes or
reopens it. The executor alone would refuse every batch sent meanwhile, so the core keeps the
same state and decides with it:

* **open**: the replica is not routable (routing, late binding, stealing and admission's
  capacity all skip it); its queued steps are routed again, to another replica of the model or,
  when there is none, to a fresh load (a broken replica is left for a healthy device); a timer
  wakes the core when the probe is due;
* **half_open** (the timer fired): routable again, but one batch at a time
  (``ReplicaRecord.free_slots``, ``binding.room``): the probe; nothing joins it or is sent ahead;
* **closed** (the probe succeeded): as any replica.

A draining replica (a rollout) stays unroutable whatever its breaker says. Pure: no I/O, no
clock; the driver passes ``now``.
"""

from __future__ import annotations

from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.events import ReplicaBreakerChanged
from control.core.parts import ActionLog, Queues, Timers
from control.core.queueing import dequeue

#: the timer kind that moves an open breaker to half_open (its ident: the replica id)
PROBE = "probe"


def breaker_changed(
    pol: Policies, cluster: Cluster, queues: Queues, timers: Timers, log: ActionLog,
    ev: ReplicaBreakerChanged, now: float,
) -> None:  # fmt: skip
    """Apply the executor's report (see the module doc)."""
    rec = cluster.replicas.get(ev.replica_id)
    if rec is None:
        return  # unloaded or lost meanwhile: nothing to route around
    if not ev.open:
        if rec.breaker == "open":  # closed before the core's own probe time: routable again
            rec.routable = not rec.draining
        if rec.breaker != "closed":
            rec.breaker = "closed"
            log.counters["breakers.closed"] += 1
        queues.dirty.add(rec.replica_id)
        return
    rec.breaker = "open"
    rec.routable = False
    log.counters["breakers.opened"] += 1
    for step in list(rec.queue.values()):  # routed again: to a replica that can run them
        dequeue(pol, cluster, queues, step, False, now)
        queues.ready.append(step)
    queues.unbind_sessions(rec.replica_id)
    timers.arm(now + max(0.0, ev.probe_in_s), PROBE, rec.replica_id)


def probe_due(cluster: Cluster, queues: Queues, replica_id: str) -> None:
    """The breaker's cooldown ended: the replica takes one batch, the probe (half_open)."""
    rec = cluster.replicas.get(replica_id)
    if rec is None or rec.breaker != "open":
        return  # gone, or closed meanwhile
    rec.breaker = "half_open"
    rec.routable = not rec.draining
    queues.dirty.add(replica_id)
