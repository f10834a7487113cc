"""Settings of the tenancy manager (passed in by the drivers; never read from the environment)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TenancyManagerConfig:
    """How the tenancy half is assembled.

    fair_share: registered fair-share policy name ("vtc", "fcfs", "rate_limit").
    fair_share_config: that policy's config object (None: its defaults).
    default_max_queued_runs: bound on runs a tenant may have admitted but not started, unless
        its ``queued_runs`` quota says otherwise (queues are always bounded).
    admit_unknown_tenants: treat a tenant missing from the config as weight 1 with no quota;
        when False such requests are refused.
    device_us_per_cost_unit: device microseconds one cost unit takes, from measured profiles;
        meters ``device_seconds_per_hour`` quotas.
    held_retry_after_s: retry-after given when a held resource (concurrency, queue slots) is
        full, since nothing in the core knows when a run will end.
    max_remembered_rejections: refusals kept so that ``explain`` can answer for them.
    strict_priority_lead: cost units (per unit of weight) a ``strict_priority`` tenant may run
        ahead of the least-served other waiting tenant while its work overtakes theirs; past
        that its work waits its fair turn (the bound that keeps strict priority from starving
        anyone; see ``strict``).
    """

    fair_share: str = "vtc"
    fair_share_config: object | None = None
    default_max_queued_runs: int = 10_000
    admit_unknown_tenants: bool = True
    device_us_per_cost_unit: int = 1000
    held_retry_after_s: float = 1.0
    max_remembered_rejections: int = 1024
    strict_priority_lead: int = 20_000

    def __post_init__(self) -> None:
        for name in (
            "default_max_queued_runs",
            "device_us_per_cost_unit",
            "max_remembered_rejections",
            "strict_priority_lead",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.held_retry_after_s <= 0:
            raise ValueError(f"held_retry_after_s must be > 0, got {self.held_retry_after_s}")
