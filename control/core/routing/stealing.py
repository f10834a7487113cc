"""Priced work stealing: an idle replica takes queued work only when it pays.

The price of moving one queued step from a victim replica to an idle thief is the model load
time on the thief (zero when the model is loaded there) plus the prefix-cache saving lost by
leaving the victim plus the input transfer to the thief. The steal happens exactly when the
queue delay it saves (the step's predicted wait on the victim minus its wait on the thief)
exceeds that price by more than ``min_gain_us``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from control.core.values import value


@dataclass(frozen=True)
class StealConfig:
    enabled: bool = field(default=True, metadata={"help": "allow idle replicas to steal"})
    min_gain_us: int = field(
        default=0, metadata={"help": "saved delay must beat the price by more than this"}
    )
    allow_loads: bool = field(
        default=True,
        metadata={"help": "idle cold-pool devices may load a model to take its queued work"},
    )


@value
class StealDecision:
    steal: bool
    saved_us: int
    price_us: int
    reason: str


def price_steal(
    victim_wait_us: int,
    thief_wait_us: int,
    load_us: int,
    lost_cache_us: int,
    transfer_us: int,
    config: StealConfig,
) -> StealDecision:
    """Whether one step should move from its victim queue to an idle thief. Pure."""
    saved = victim_wait_us - thief_wait_us
    price = load_us + lost_cache_us + transfer_us
    steal = config.enabled and saved - price > config.min_gain_us
    verdict = "steal" if steal else "keep"
    reason = (
        f"{verdict}: saves {saved} us of queueing vs price {price} us "
        f"(load {load_us}, lost cache {lost_cache_us}, transfer {transfer_us})"
    )
    return StealDecision(steal, saved, price, reason)
