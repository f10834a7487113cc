"""Replica counts from demand: ceil(arrival rate x service time / target utilization).

The offered load (rate x service time, in erlangs) is rounded to micro-erlangs before the
integer ceiling so that 7 req/s x 0.1 s at 70 % gives exactly 1 replica, not 2 by float noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from control.core.placement.demand import Demand
from control.core.placement.inputs import ClusterSnapshot
from control.core.placement.plan import PlanError


@dataclass(frozen=True)
class ReplicaConfig:
    target_util_milli: int = field(
        default=700,
        metadata={"help": "busy fraction each replica is sized for, in thousandths (700 = 70 %)"},
    )
    min_replicas: int = field(
        default=1,
        metadata={
            "help": "replicas of every registered model even without demand (0 = scale to zero)"
        },
    )
    max_replicas: int = field(
        default=64, metadata={"help": "cap on one model's replicas whatever the demand"}
    )

    def __post_init__(self) -> None:
        if not 1 <= self.target_util_milli <= 1000:
            raise PlanError(
                f"ReplicaConfig.target_util_milli={self.target_util_milli!r}: must be in 1..1000"
            )
        if self.min_replicas < 0:
            raise PlanError(f"ReplicaConfig.min_replicas={self.min_replicas!r}: must be >= 0")
        if self.max_replicas < max(1, self.min_replicas):
            raise PlanError(
                f"ReplicaConfig.max_replicas={self.max_replicas!r}: must be >= 1 and >= min_replicas"
            )


@dataclass(frozen=True)
class ReplicaTarget:
    count: int
    reason: str
    capped: bool = False  # demand asked for more than max_replicas


def needed_replicas(rate: float, service_s: float, target_util_milli: int) -> int:
    """ceil(rate x service_s / (target_util_milli / 1000)), exact on micro-erlangs."""
    micro_erlangs = round(rate * service_s * 1_000_000)
    return -(-micro_erlangs // (target_util_milli * 1000))


def replica_targets(
    snapshot: ClusterSnapshot, demand: Demand, config: ReplicaConfig
) -> dict[str, ReplicaTarget]:
    """Model key -> how many replicas demand asks for, with the arithmetic as the reason."""
    out: dict[str, ReplicaTarget] = {}
    util = config.target_util_milli
    for m in snapshot.models:
        d = demand.of(m.key)
        need = needed_replicas(d.arrival_rate, d.service_s, util)
        count = min(max(need, config.min_replicas), config.max_replicas)
        why = (
            f"{d.arrival_rate:.2f} req/s x {d.service_s * 1000:.1f} ms / {util / 10:.0f}% "
            f"utilization needs {need}"
        )
        if need < config.min_replicas:
            why += f", raised to the minimum {config.min_replicas}"
        capped = need > config.max_replicas
        if capped:
            why += f", capped at {config.max_replicas}"
        out[m.key] = ReplicaTarget(count, why, capped)
    return out


def one_each(snapshot: ClusterSnapshot) -> dict[str, ReplicaTarget]:
    """One replica per model: the target of policies that ignore demand."""
    return {m.key: ReplicaTarget(1, "one replica per model") for m in snapshot.models}
