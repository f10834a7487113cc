"""What each quota resource measures, and how a run's demand on it is computed.

A resource is either *windowed* (usage = what runs admitted in the last ``period_s`` consumed:
tokens per minute, requests per minute, device-seconds per hour) or *held* (usage = what runs in
flight hold: concurrent requests). Windowed demand is estimated at admission and corrected to the
actual figure at release. Adding a resource is adding a registry entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from control.core.tenancy.base import AdmissionRequest


@dataclass(frozen=True)
class ResourceMeter:
    """How one resource is metered.

    windowed: usage expires ``period_s`` after admission (else it is held until release).
    demand: amount a run asks for at admission, in the resource's internal unit.
    actual: amount it really used, from (used_tokens, used_cost_units, device_us_per_unit).
    scale: internal units per unit of the quota's ``nominal`` (device-seconds are kept in ms).
    unit: word used in explanations.
    """

    windowed: bool
    demand: Callable[[AdmissionRequest, int], int]
    actual: Callable[[int, int, int], int]
    scale: int
    unit: str


def _device_ms(cost_units: int, device_us_per_unit: int) -> int:
    return -(-cost_units * device_us_per_unit // 1000)


RESOURCE_METERS: dict[str, ResourceMeter] = {
    "tokens_per_min": ResourceMeter(
        True, lambda r, _: r.est_tokens, lambda tok, _c, _d: tok, 1, "tokens"
    ),
    "requests_per_min": ResourceMeter(True, lambda r, _: 1, lambda _t, _c, _d: 1, 1, "requests"),
    "device_seconds_per_hour": ResourceMeter(
        True,
        lambda r, d: _device_ms(r.est_cost_units, d),
        lambda _t, cost, d: _device_ms(cost, d),
        1000,
        "device-ms",
    ),
    "concurrent_requests": ResourceMeter(False, lambda r, _: 1, lambda _t, _c, _d: 0, 1, "runs"),
}

#: Per-tenant admission limits that are not cohort quotas (not borrowable):
#: ``request_burst``/``token_burst`` configure a token bucket (capacity = nominal, refilled by
#: nominal every period_s); ``queued_runs`` bounds runs admitted but not yet started.
ADMISSION_RESOURCES: frozenset[str] = frozenset({"request_burst", "token_burst", "queued_runs"})


def known_resources() -> frozenset[str]:
    return frozenset(RESOURCE_METERS) | ADMISSION_RESOURCES


def check_resource(resource: str) -> None:
    """Raise ValueError naming an unknown resource."""
    if resource not in known_resources():
        raise ValueError(
            f"unknown quota resource {resource!r}; expected one of {sorted(known_resources())}"
        )
