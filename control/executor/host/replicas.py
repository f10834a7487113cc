"""The replicas of a local executor: which are loaded (or loading) on which device, and making
room for a new one by evicting least-recently-used idle ones (memory accounting and the LRU
choice are :class:`~control.executor.host.lru.ReplicaTable`'s).

A load reserves its planned memory at once (in flight, so never evicted while it loads) and is
answered by the worker (``loaded`` or ``load_failed``); its future then resolves to a
:class:`LoadReport`. A replica that turns out larger than planned evicts more. Every eviction
is an ``unload`` message to its worker and a :class:`ReplicaEvicted` event.

Not thread-safe: the executor calls it under its lock. ``send(device id, message)`` never
blocks; ``emit`` delivers an event.
"""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from control.executor import sources
from control.executor.futures import settle
from control.executor.host.lru import ReplicaTable
from control.executor.protocol import (
    ExecutorError,
    ExecutorEvent,
    LoadReport,
    ModelRef,
    ReplicaEvicted,
    wire,
)


@dataclass
class _PendingLoad:
    future: concurrent.futures.Future
    replica_id: str
    device_id: str
    ref: ModelRef
    evicted: tuple[str, ...]
    holds: tuple[str, ...] = ()  # the group's other devices (multi-device replica)
    budgets: dict[str, int] = field(default_factory=dict)  # device id -> MiB, of the group


class ReplicaSet:
    def __init__(
        self, send: Callable[[str, tuple], bool], emit: Callable[[ExecutorEvent], None]
    ) -> None:
        self._send, self._emit = send, emit
        self._ids = itertools.count()
        self._loaded: dict[str, tuple[str, ModelRef]] = {}  # replica -> (device, ref)
        self.table = ReplicaTable()
        self._loads: dict[str, _PendingLoad] = {}  # load id -> pending load
        self._unloads: dict[str, tuple[str, concurrent.futures.Future]] = {}

    def device_of(self, replica_id: str) -> str | None:
        """The device of a loaded replica, or None (not loaded, or still loading)."""
        found = self._loaded.get(replica_id)
        return found[0] if found is not None else None

    def loading_devices(self) -> set[str]:
        """Devices with a load in progress (their workers may be silent for longer)."""
        return {p.device_id for p in self._loads.values()}

    def load(
        self,
        replica_id: str,
        ref: ModelRef,
        budgets: dict[str, int],
        need_mib: int,
        now: float,
    ) -> concurrent.futures.Future:
        """Plan room for ``need_mib`` (see :func:`estimate_mib`) within the budget of EVERY
        device of ``budgets`` (device id -> MiB; the first runs the replica, the others hold
        the same MiB for it: a multi-device replica), evict, reserve, and ask the first
        device's worker; see the module docstring. Refused when any device cannot hold it."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if replica_id in self._loaded or replica_id in {p.replica_id for p in self._loads.values()}:
            raise ExecutorError(f"replica_id {replica_id!r} is already loaded or loading")
        device_id, *holds = budgets
        plans = [(d, self.table.plan(d, need_mib, b)) for d, b in budgets.items()]
        refused = [(d, plan.reason) for d, plan in plans if not plan.fits]
        if refused:
            why = refused[0][1]
            if holds:
                why = (f"a replica on {len(budgets)} devices needs {need_mib} MiB on each; "
                       f"{', '.join(d for d, _ in refused)} cannot hold it ({why})")  # fmt: skip
            settle(future, LoadReport(replica_id, device_id, False, why))
            return future
        evict = tuple(dict.fromkeys(v for _, plan in plans for v in plan.evict))
        for victim in evict:
            self._evict(victim, f"LRU: making room for {replica_id} ({need_mib} MiB)")
        load_id = f"load-{next(self._ids)}"
        pending = _PendingLoad(future, replica_id, device_id, ref, evict, tuple(holds), budgets)
        self._loads[load_id] = pending
        self.table.add(replica_id, device_id, need_mib, now, pending.holds)
        self.table.touch(replica_id, now, +1)
        self._send(device_id, (wire.LOAD, load_id, replica_id, ref))
        return future

    def unload(self, replica_id: str) -> concurrent.futures.Future:
        """Ask the worker to unload; the future gives the MiB it freed."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if replica_id not in self._loaded:
            raise ExecutorError(f"replica_id {replica_id!r} is not loaded")
        device_id, _ = self._loaded.pop(replica_id)
        self.table.remove(replica_id)
        self._unloads[replica_id] = (device_id, future)
        self._send(device_id, (wire.UNLOAD, replica_id))
        return future

    def _evict(self, replica_id: str, reason: str) -> None:
        device_id, _ = self._loaded.pop(replica_id)
        entry = self.table.remove(replica_id)
        self._send(device_id, (wire.UNLOAD, replica_id))
        freed = entry.memory_mib if entry else 0
        self._emit(ReplicaEvicted(replica_id, device_id, freed, reason))

    def on_loaded(
        self, load_id: str, replica_id: str, load_ms: float, mib: int, budget_mib: int, now: float
    ) -> None:
        pending = self._loads.pop(load_id, None)
        if pending is None:
            return
        budgets = {**pending.budgets, pending.device_id: budget_mib}
        self.table.remove(replica_id)
        # Account what the caller planned for when that is more (KV cache, activations).
        size = max(mib, pending.ref.expected_mib or 0)
        self.table.add(replica_id, pending.device_id, size, now, pending.holds)
        self._loaded[replica_id] = (pending.device_id, pending.ref)
        evicted = list(pending.evicted)
        # The estimate may have been low: if the real size overflows the budget, evict more.
        for device_id in (pending.device_id, *pending.holds):
            if self.table.used_mib(device_id) > budgets[device_id]:
                keep = frozenset({replica_id})
                plan = self.table.plan(device_id, 0, budgets[device_id], keep)
                for victim in plan.evict:
                    if victim in self._loaded:
                        self._evict(victim, f"LRU: {replica_id} took {mib} MiB, more than planned")
                        evicted.append(victim)
        report = LoadReport(
            replica_id, pending.device_id, True, "loaded", load_ms, mib, tuple(evicted)
        )
        settle(pending.future, report)

    def on_load_failed(self, load_id: str, replica_id: str, error: str) -> None:
        pending = self._loads.pop(load_id, None)
        self.table.remove(replica_id)
        if pending is not None:
            settle(pending.future, LoadReport(replica_id, pending.device_id, False, error))

    def on_unloaded(self, replica_id: str, freed: int) -> None:
        _, future = self._unloads.pop(replica_id, (None, None))
        if future is not None:
            settle(future, freed)

    def forget_device(self, device_id: str, reason: str) -> tuple[str, ...]:
        """The device's worker is gone: its replicas are no more, its loads fail, its unloads
        are done. Returns the replicas lost (sorted)."""
        lost = tuple(sorted(r for r in self._loaded if self.table.entries[r].on(device_id)))
        for replica_id in lost:  # a replica that held the device as one of its group: lost too
            home, _ = self._loaded.pop(replica_id)
            self.table.remove(replica_id)
            if home != device_id:
                self._send(home, (wire.UNLOAD, replica_id))
        for load_id, pending in list(self._loads.items()):
            if device_id in (pending.device_id, *pending.holds):
                del self._loads[load_id]
                self.table.remove(pending.replica_id)
                settle(
                    pending.future,
                    LoadReport(pending.replica_id, device_id, False, f"worker down: {reason}"),
                )
        for replica_id, (holder, future) in list(self._unloads.items()):
            if holder == device_id:
                del self._unloads[replica_id]
                settle(future, 0)
        return lost

    def held_on(self, device_id: str) -> list[tuple[str, int]]:
        """(replica id, MiB) of the multi-device replicas holding ``device_id`` for their group
        (not running on it: its worker does not see them)."""
        return sorted((r, e.memory_mib) for r, e in self.table.entries.items()
                      if device_id in e.holds)  # fmt: skip

    def fail_loads(self, reason: str) -> None:
        """Resolve every pending load as failed (the executor stops)."""
        for pending in self._loads.values():
            settle(pending.future, LoadReport(pending.replica_id, pending.device_id, False, reason))
        self._loads.clear()


def estimate_mib(ref: ModelRef, cache_dir: Path) -> int:
    """Planned MiB of a model: what its caller stated (``expected_mib``), else the size of the
    weights already on disk (0 when not there yet). Reads the disk: not under a lock."""
    if ref.expected_mib:
        return ref.expected_mib
    if ref.source in ("minilm", "hf"):
        return sources.estimate_mib(sources.resolve(ref, cache_dir))
    if ref.source == "smollm2":
        return sources.estimate_mib(cache_dir / "smollm2-135m-instruct")
    if ref.source == "tiny":
        return sources.estimate_mib(cache_dir / "tiny" / (ref.path or "gpt2"))
    return 0
