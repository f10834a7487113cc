"""A small tenancy fake for the orchestration tests: first come, first served.

It admits everything (or refuses the request ids it is told to), orders queues by arrival then
key, and records every call so tests can check the core calls tenancy at the contract's points.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from control.core.tenancy.base import (
    AdmissionDecision,
    AdmissionRequest,
    Admitted,
    HeadroomDecision,
    PoolUsage,
    QueuedWork,
    QueuePositions,
    ReclaimOrder,
    Rejected,
    TenancyConfig,
)


class FcfsTenancy:
    def __init__(
        self, refuse: Set[str] = frozenset(), deny_devices: Set[str] = frozenset()
    ) -> None:
        self.refuse = set(refuse)
        self.deny_devices = set(deny_devices)
        self.calls: list[tuple[str, object]] = []
        self.charged: dict[str, int] = {}
        self.charged_keys: list[str | None] = []
        self.queued: set[str] = set()
        self.released: list[str] = []
        self.pending_reclaims: list[ReclaimOrder] = []
        self.wakeup: float | None = None

    def configure(self, config: TenancyConfig, now: float) -> None:
        self.calls.append(("configure", config))

    def admit(self, req: AdmissionRequest, now: float) -> AdmissionDecision:
        self.calls.append(("admit", req.request_id))
        if req.request_id in self.refuse:
            return Rejected(req.request_id, f"test refuses {req.request_id}", 1.5)
        return Admitted(req.request_id, False, "fcfs admits everything")

    def release(self, request_id: str, used_tokens: int, used_cost_units: int, now: float) -> None:
        self.calls.append(("release", request_id))
        self.released.append(request_id)

    def on_enqueue(self, item: QueuedWork, now: float) -> None:
        assert item.key not in self.queued, f"enqueued twice: {item.key}"
        self.queued.add(item.key)
        self.calls.append(("on_enqueue", item.key))

    def on_dequeue(self, key: str, now: float) -> None:
        self.queued.discard(key)
        self.calls.append(("on_dequeue", key))

    def order(self, items: Sequence[QueuedWork], now: float) -> list[QueuedWork]:
        return sorted(items, key=lambda w: (w.arrival, w.key))

    def queue_key(self, item: QueuedWork) -> tuple:
        return (item.arrival, item.key)

    def select(
        self, heads: Mapping[str, Sequence[QueuedWork]], limit: int, now: float
    ) -> list[QueuedWork]:
        return self.order([w for own in heads.values() for w in own], now)[:limit]

    def charge(self, tenant_id: str, cost_units: int, now: float, key: str | None = None) -> None:
        self.queued.discard(key or "")
        self.charged_keys.append(key)
        self.charged[tenant_id] = self.charged.get(tenant_id, 0) + cost_units

    def headroom_check(
        self, device_id: str, priority_class: str, usage: Mapping[str, PoolUsage]
    ) -> HeadroomDecision:
        self.calls.append(("headroom_check", device_id))
        ok = device_id not in self.deny_devices
        return HeadroomDecision(ok, False, "ok" if ok else f"{device_id} reserved")

    def reclaims(self, now: float, produced_output: Set[str]) -> list[ReclaimOrder]:
        out, self.pending_reclaims = self.pending_reclaims, []
        return [o for o in out if o.request_id not in produced_output]

    def explain(self, request_id: str, now: float, positions: QueuePositions | None = None) -> str:
        return f"fcfs: {request_id} has no tenancy limits"

    def queue_positions(self, now: float) -> QueuePositions:
        return QueuePositions({}, 0)

    def next_wakeup(self, now: float) -> float | None:
        return self.wakeup if self.wakeup is not None and self.wakeup > now else None

    def snapshot(self) -> object:
        return {"policy": "fcfs", "charged": dict(self.charged)}
