"""Admission by capacity: refuse at the door a run that would time out in the queue.

At admission the core predicts the queue delay a new run's first model steps would see from
what it already keeps: per replica the predicted service time of its queued steps (``queue_us``,
each step's share of a full batch) and when it can next start work (``busy_until``), plus the
model's pending queue of unbound steps. The backlog is spread over the model's routable
replicas. Work of a lower priority class does not count against a run: critical work overtakes
it (within a tenant by ``within_tenant_key``, and the headroom reservation keeps devices for
it), so under overload lower classes are refused first and the critical class keeps being
served. Pure: ``now`` is passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from control.core.cluster import Cluster
from control.core.parts import Queues
from control.core.tenancy.base import PRIORITY_CLASSES, priority_rank


@dataclass(frozen=True)
class CapacityAdmissionConfig:
    """Refuse a run whose predicted queue delay, times ``margin``, exceeds the time left to
    its deadline. ``enabled`` False: the old behaviour (admit, let it time out)."""

    enabled: bool = field(default=True, metadata={"help": "refuse runs predicted to time out"})
    margin: float = field(
        default=1.0,
        metadata={"help": "factor on the predicted delay before comparing with the deadline"},
    )

    lower_class_path_s: float | None = field(
        default=None,
        metadata={
            "help": "headroom in time on the gateway's own path: a run of a class below the "
            "most urgent one is refused while the path's predicted delay exceeds this, or "
            "while a call of the most urgent class is on the path, so the critical class "
            "finds the path (nearly) empty under overload. None: off (only "
            "the deadline counts; a small value refuses lower classes in ordinary bursts)"
        },
    )

    def __post_init__(self) -> None:
        if not (self.margin > 0 and math.isfinite(self.margin)):
            raise ValueError(f"capacity margin must be a finite number > 0, got {self.margin!r}")
        path_s = self.lower_class_path_s
        if path_s is not None and not (path_s >= 0 and math.isfinite(path_s)):
            raise ValueError(
                f"lower_class_path_s must be a finite number >= 0, got {self.lower_class_path_s!r}"
            )


@dataclass(frozen=True)
class CapacityRefusal:
    """Why a run is refused: its predicted delay, the time it had, the model that is full."""

    reason: str
    retry_after_s: float


def _counted_us(steps: object, rank: int) -> int:
    """Predicted service time (us) of the steps a run of class ``rank`` waits behind: those
    of its own class or a more urgent one."""
    total = 0
    for step in steps:  # type: ignore[attr-defined]
        if priority_rank(step.work.priority_class) <= rank:
            total += step.est_us
    return total


def model_delay_s(
    cluster: Cluster, queues: Queues, model_key: str, priority_class: str, now: float,
    kept: frozenset[str] = frozenset(),
) -> float | None:  # fmt: skip
    """Predicted queue delay (s) of a new step of ``model_key`` of ``priority_class``, or None
    when the model has no routable replica (a cold start: no backlog to predict from). The
    backlog is spread over the replicas the class may use: not those in ``kept`` (a headroom
    reservation holds them for other classes), unless that leaves none."""
    replicas = [r for r in cluster.by_model.get(model_key, {}).values() if r.routable]
    if not replicas:
        return None
    if kept:
        replicas = [r for r in replicas if r.replica_id not in kept] or replicas
    rank = priority_rank(priority_class)
    everything = rank == len(PRIORITY_CLASSES) - 1  # the least urgent class waits for all
    pending = queues.pending.get(model_key)
    backlog_us = 0
    if pending is not None and len(pending):
        if everything:
            backlog_us += pending.us
        else:
            backlog_us += _counted_us((e[2] for e in pending.entries.values()), rank)
    busy_s = 0.0
    for rec in replicas:
        backlog_us += rec.queue_us if everything else _counted_us(rec.queue.values(), rank)
        busy_s += max(0.0, rec.busy_until - now, rec.ready_at - now)
    return (backlog_us / 1e6 + busy_s) / len(replicas)


def predicted_delay_s(
    cluster: Cluster, queues: Queues, models: frozenset, priority_class: str, now: float,
    kept: frozenset[str] = frozenset(),
) -> tuple[float, str] | None:  # fmt: skip
    """The longest predicted delay over a run's first models, with that model; None if none
    can be predicted (``kept``: as for ``model_delay_s``)."""
    worst: tuple[float, str] | None = None
    for key in sorted(m for m in models if m):
        delay = model_delay_s(cluster, queues, key, priority_class, now, kept)
        if delay is not None and (worst is None or delay > worst[0]):
            worst = (delay, key)
    return worst


def capacity_refusal(
    config: CapacityAdmissionConfig, cluster: Cluster, queues: Queues, models: frozenset,
    priority_class: str, deadline: float | None, now: float, kept: frozenset[str] = frozenset(),
) -> CapacityRefusal | None:  # fmt: skip
    """A refusal when the run's predicted queue delay (times the margin) already exceeds the
    time to its deadline; None to admit (setting off, no deadline, nothing predicted).
    ``retry_after_s`` is the predicted drain time of the backlog ahead of it; ``kept``: the
    replicas headroom keeps from the run's class (``headroom_fit.kept_from``)."""
    if not config.enabled or deadline is None:
        return None
    worst = predicted_delay_s(cluster, queues, models, priority_class, now, kept)
    if worst is None:
        return None
    delay, model_key = worst
    left = deadline - now
    if delay * config.margin <= left:
        return None
    return CapacityRefusal(
        f"over capacity: the predicted queue delay for {model_key} ({priority_class}) is "
        f"{delay:.2f} s, longer than the {max(0.0, left):.2f} s left to this run's deadline",
        retry_after_s=delay,
    )


def path_refusal(
    config: CapacityAdmissionConfig, in_flight: int, per_request_s: float, priority_class: str,
    left_s: float | None, urgent_in_flight: int = 0,
) -> CapacityRefusal | None:  # fmt: skip
    """The door's decision on the gateway's own path (HTTP, auth, record, settle, commits),
    before the run reaches the core's queues: ``in_flight`` requests are on that path and it
    answers one every ``per_request_s`` (measured), so a new one is predicted to wait
    ``in_flight * per_request_s``. Refused when that (times the margin) exceeds the ``left_s``
    its caller waits, or, for a class below the most urgent, the ``lower_class_path_s``
    headroom, or while ``urgent_in_flight`` calls of the most urgent class are on the path
    (with the headroom set: a critical call then shares the path with no lower-class call
    admitted after it). None to admit (setting off, nothing measured yet)."""
    if not config.enabled or per_request_s <= 0 or in_flight <= 0:
        return None
    delay = in_flight * per_request_s
    lower = priority_rank(priority_class) > 0
    headroom = config.lower_class_path_s
    if left_s is not None and delay * config.margin > left_s:
        why = f"longer than the {max(0.0, left_s):.2f} s its caller waits"
    elif lower and headroom is not None and delay > headroom:
        why = f"past the {headroom:.3f} s the gateway keeps for more urgent classes"
    elif lower and headroom is not None and urgent_in_flight > 0:
        why = f"and {urgent_in_flight} call(s) of the most urgent class are on it"
    else:
        return None
    return CapacityRefusal(
        f"over capacity: the gateway's predicted delay ({in_flight} in flight) is "
        f"{delay:.3f} s for {priority_class}, {why}",
        retry_after_s=delay,
    )
