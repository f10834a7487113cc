"""Headroom reservations: a share of a device pool's batch slots kept for named classes.

A reservation holds back ``ceil(capacity * reserved_milli / 1000)`` slots of its pool. Classes
it names may always use them. Other classes may fill the pool only up to ``capacity -
reserved`` with ordinary work; beyond that, only as preemptible work and only if the
reservation is borrowable. Because every non-preemptible slot counts against ``capacity -
reserved`` (whatever its class), a non-allowed class can never hold reserved slots except
preemptibly. An allowed class finding the pool full of preemptible work is allowed at once and
the caller preempts, so a burst of an allowed class gets in within one step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from control.core.tenancy.base import HeadroomDecision, HeadroomSpec, PoolUsage


@dataclass(frozen=True)
class HeadroomPoolSnapshot:
    """A reservation as last seen: slots held back out of the pool's capacity."""

    reservation_id: str
    device_ids: tuple[str, ...]
    reserved_milli: int
    allowed_classes: tuple[str, ...]
    borrowable: bool
    capacity_slots: int
    reserved_slots: int
    used_slots: int
    used_slots_preemptible: int


#: a reservation's answer for a step it lets in only as preemptible work (its reason is in
#: the guard's list of reasons; decisions are immutable values, so one serves every such step)
_BORROWS = HeadroomDecision(True, True, "")


class HeadroomGuard:
    """Applies every reservation whose pool contains the device being dispatched to."""

    def __init__(self) -> None:
        self._specs: tuple[HeadroomSpec, ...] = ()
        self._seen: dict[str, tuple[int, int, int]] = {}

    def configure(self, specs: Iterable[HeadroomSpec]) -> None:
        specs = tuple(specs)
        for spec in specs:
            if not 0 <= spec.reserved_milli <= 1000:
                raise ValueError(
                    f"reserved_milli of {spec.reservation_id!r} must be in "
                    f"[0, 1000], got {spec.reserved_milli}"
                )
        self._specs = specs

    @staticmethod
    def _pool(spec: HeadroomSpec, usage: Mapping[str, PoolUsage]) -> tuple[int, int, int]:
        devices = [usage[d] for d in sorted(spec.device_ids) if d in usage]
        return (
            sum(u.capacity_slots for u in devices),
            sum(u.used_slots for u in devices),
            sum(u.used_slots_preemptible for u in devices),
        )

    def check(
        self, device_id: str, priority_class: str, usage: Mapping[str, PoolUsage]
    ) -> HeadroomDecision:
        """May one more step of ``priority_class`` take a slot on ``device_id``? Records the
        pool occupancy seen, for snapshots and explanations."""
        preemptible, reasons = False, []
        device = usage.get(device_id)
        if device is not None and device.used_slots >= device.capacity_slots:
            if device.used_slots_preemptible == 0 or not self._allowed_anywhere(
                device_id, priority_class
            ):
                return HeadroomDecision(
                    False,
                    False,
                    f"device {device_id} is full "
                    f"({device.used_slots}/{device.capacity_slots} slots)",
                )
            reasons.append(f"{priority_class} preempts preemptible work on {device_id}")
        for spec in self._specs:
            if device_id not in spec.device_ids:
                continue
            verdict = self._apply(spec, priority_class, usage, reasons)
            if verdict is None:
                continue
            if not verdict.allowed:
                return verdict
            preemptible = True
        return HeadroomDecision(True, preemptible, "; ".join(reasons) or "no reservation applies")

    def _apply(
        self,
        spec: HeadroomSpec,
        priority_class: str,
        usage: Mapping[str, PoolUsage],
        reasons: list[str],
    ) -> HeadroomDecision | None:
        """One reservation covering the device: records its pool's occupancy, then answers
        None (it allows the step; a sentence may join ``reasons``), ``_BORROWS`` (it allows the
        step only as preemptible work) or a refusal."""
        capacity, used, used_pre = self._pool(spec, usage)
        reserved = -(-capacity * spec.reserved_milli // 1000)
        self._seen[spec.reservation_id] = (capacity, used, used_pre)
        if priority_class in spec.allowed_classes:
            if used < capacity or used_pre > 0:
                reasons.append(f"{priority_class} may use reservation {spec.reservation_id}")
                return None
            return HeadroomDecision(
                False,
                False,
                f"pool of {spec.reservation_id} is full "
                f"({used}/{capacity} slots, none preemptible)",
            )
        if used - used_pre + 1 <= capacity - reserved:
            return None
        if spec.borrowable and used + 1 <= capacity:
            reasons.append(
                f"{priority_class} borrows headroom of {spec.reservation_id} "
                f"preemptibly ({reserved} of {capacity} slots reserved for "
                f"{', '.join(sorted(spec.allowed_classes))})"
            )
            return _BORROWS
        return HeadroomDecision(
            False,
            False,
            (
                f"reservation {spec.reservation_id} holds back {reserved} of {capacity} slots "
                f"for {', '.join(sorted(spec.allowed_classes))}; {used} in use"
                + ("" if spec.borrowable else ", and it does not lend")
            ),
        )

    def _allowed_anywhere(self, device_id: str, priority_class: str) -> bool:
        """Is the class named by a reservation covering the device (so it may preempt)?"""
        return any(
            device_id in s.device_ids and priority_class in s.allowed_classes for s in self._specs
        )

    def held_back(self, priority_class: str) -> list[str]:
        """Sentences about reservations that hold slots back from ``priority_class``."""
        out = []
        for spec in self._specs:
            if priority_class in spec.allowed_classes or spec.reservation_id not in self._seen:
                continue
            capacity = self._seen[spec.reservation_id][0]
            reserved = -(-capacity * spec.reserved_milli // 1000)
            out.append(
                f"reservation {spec.reservation_id} holds back {reserved} of {capacity} "
                f"slots for {', '.join(sorted(spec.allowed_classes))}"
            )
        return out

    def snapshot(self) -> tuple[HeadroomPoolSnapshot, ...]:
        out = []
        for spec in self._specs:
            capacity, used, used_pre = self._seen.get(spec.reservation_id, (0, 0, 0))
            out.append(
                HeadroomPoolSnapshot(
                    spec.reservation_id,
                    tuple(sorted(spec.device_ids)),
                    spec.reserved_milli,
                    tuple(sorted(spec.allowed_classes)),
                    spec.borrowable,
                    capacity,
                    -(-capacity * spec.reserved_milli // 1000),
                    used,
                    used_pre,
                )
            )
        return tuple(out)
