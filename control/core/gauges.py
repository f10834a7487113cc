"""The figures the live metrics sample every second, read from a core without a snapshot.

``build_gauges`` is O(replicas + devices): no per-step views and no explanations (a full
snapshot costs O(queued log queued) and is for display; sampled every second it stalled the
driver under a backlog).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from control.core.cluster import Cluster
from control.core.context import CoreState


@dataclass(frozen=True)
class PreloadStats:
    issued: int
    hits: int
    misses: int
    hit_rate_milli: int | None  # hits / (hits + misses) in thousandths; None before any outcome


@dataclass(frozen=True)
class CoreGauges:
    """The few figures the live metrics sample every second, in O(replicas + devices): no
    per-step views and no explanations (a full snapshot costs O(queued log queued) and is for
    display; sampled every second it stalled the driver under a backlog)."""

    #: steps waiting per model: queued on its replicas or for a replica ("unplaced": no
    #: replica can be placed yet)
    queue_depth: Mapping[str, int]
    runs_in_flight: int
    preload: PreloadStats
    device_ids: tuple[str, ...]
    #: autoscaling events so far (``control.core.autoscaler``): scale_out, scale_in, drained,
    #: no_room (a scale-out found no device with room)
    scale_events: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


def preload_stats(cluster: Cluster) -> PreloadStats:
    """Speculative preloads issued, used (hits) and evicted unused (misses)."""
    preload = cluster.preload
    hits, misses = preload["hits"], preload["misses"]
    rate = hits * 1000 // (hits + misses) if hits + misses else None
    return PreloadStats(preload["issued"], hits, misses, rate)


SCALE_EVENTS = ("scale_out", "scale_in", "drained", "no_room")


def build_gauges(st: CoreState) -> CoreGauges:
    """The sampled figures of :class:`CoreGauges` (reads the state, changes nothing)."""
    cluster, queues = st.cluster, st.queues
    depth: dict[str, int] = {}
    for rec in cluster.replicas.values():
        depth[rec.model.key] = depth.get(rec.model.key, 0) + len(rec.queue)
    for model, q in queues.pending.items():
        depth[model] = depth.get(model, 0) + len(q)
    depth["unplaced"] = sum(len(steps) for steps in queues.unplaced.values())
    return CoreGauges(
        MappingProxyType(depth),
        len(st.runs.active),
        preload_stats(cluster),
        tuple(sorted(cluster.devices)),
        MappingProxyType({e: st.log.counters[f"autoscale.{e}"] for e in SCALE_EVENTS}),
    )
