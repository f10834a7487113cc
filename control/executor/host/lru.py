"""Memory accounting of replicas per device and the LRU choice of what to evict.

Pure bookkeeping used by the executor's parent process (no torch, no clock: ``now`` is passed
in). A replica is *idle* when no batch of it is in flight; only idle replicas may be evicted,
least recently used first.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ReplicaEntry:
    replica_id: str
    device_id: str
    memory_mib: int
    last_used: float
    in_flight: int = 0
    holds: tuple[str, ...] = ()  # the other devices of a multi-device replica (same MiB each)

    def on(self, device_id: str) -> bool:
        return device_id == self.device_id or device_id in self.holds


@dataclass(frozen=True)
class EvictionPlan:
    fits: bool
    evict: tuple[str, ...]
    reason: str


class ReplicaTable:
    def __init__(self) -> None:
        self.entries: dict[str, ReplicaEntry] = {}

    def used_mib(self, device_id: str) -> int:
        return sum(e.memory_mib for e in self.entries.values() if e.on(device_id))

    def on_device(self, device_id: str) -> list[str]:
        return sorted(r for r, e in self.entries.items() if e.on(device_id))

    def add(self, replica_id: str, device_id: str, memory_mib: int, now: float,
            holds: tuple[str, ...] = ()) -> None:  # fmt: skip
        self.entries[replica_id] = ReplicaEntry(replica_id, device_id, memory_mib, now, 0, holds)

    def remove(self, replica_id: str) -> ReplicaEntry | None:
        return self.entries.pop(replica_id, None)

    def touch(self, replica_id: str, now: float, delta_in_flight: int) -> None:
        entry = self.entries.get(replica_id)
        if entry is not None:
            entry.last_used = now
            entry.in_flight = max(0, entry.in_flight + delta_in_flight)

    def plan(
        self, device_id: str, need_mib: int, budget_mib: int, keep: frozenset[str] = frozenset()
    ) -> EvictionPlan:
        """Which idle replicas to evict (LRU first) so ``need_mib`` more fits in ``budget_mib``.

        ``keep`` names replicas never to evict (the one being loaded). Returns fits=False, and
        evicts nothing, when even evicting every idle replica would not make room.
        """
        free = budget_mib - self.used_mib(device_id)
        if need_mib <= free:
            return EvictionPlan(True, (), f"{need_mib} MiB fits in {free} MiB free")
        idle = sorted(
            (
                e
                for e in self.entries.values()
                if e.on(device_id) and e.in_flight == 0 and e.replica_id not in keep
            ),
            key=lambda e: (e.last_used, e.replica_id),
        )
        chosen: list[str] = []
        for entry in idle:
            if need_mib <= free:
                break
            chosen.append(entry.replica_id)
            free += entry.memory_mib
        if need_mib > free:
            return EvictionPlan(
                False,
                (),
                f"{need_mib} MiB does not fit on {device_id}: budget {budget_mib} MiB, "
                f"{free} MiB free even after evicting every idle replica",
            )
        return EvictionPlan(
            True, tuple(chosen), f"evict LRU idle {chosen} to free room for {need_mib} MiB"
        )
