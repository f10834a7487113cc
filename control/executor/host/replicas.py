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
from dataclasses import dataclass
from pathlib import Path

from control.executor import sources
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
        device_id: str,
        need_mib: int,
        budget_mib: int,
        now: float,
    ) -> concurrent.futures.Future:
        """Plan room for ``need_mib`` (see :func:`estimate_mib`) within ``budget_mib``, evict,
        reserve, and ask the worker; see the module docstring."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if replica_id in self._loaded or replica_id in {p.replica_id for p in self._loads.values()}:
            raise ExecutorError(f"replica_id {replica_id!r} is already loaded or loading")
        plan = self.table.plan(device_id, need_mib, budget_mib)
        if not plan.fits:
            future.set_result(LoadReport(replica_id, device_id, False, plan.reason))
            return future
        for victim in plan.evict:
            self._evict(victim, f"LRU: making room for {replica_id} ({need_mib} MiB)")
        load_id = f"load-{next(self._ids)}"
        self._loads[load_id] = _PendingLoad(future, replica_id, device_id, ref, plan.evict)
        self.table.add(replica_id, device_id, need_mib, now)
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
        self.table.remove(replica_id)
        # Account what the caller planned for when that is more (KV cache, activations).
        self.table.add(replica_id, pending.device_id, max(mib, pending.ref.expected_mib or 0), now)
        self._loaded[replica_id] = (pending.device_id, pending.ref)
        evicted = list(pending.evicted)
        # The estimate may have been low: if the real size overflows the budget, evict more.
        if self.table.used_mib(pending.device_id) > budget_mib:
            keep = frozenset({replica_id})
            for victim in self.table.plan(pending.device_id, 0, budget_mib, keep=keep).evict:
                self._evict(victim, f"LRU: {replica_id} took {mib} MiB, more than planned")
                evicted.append(victim)
        report = LoadReport(
            replica_id, pending.device_id, True, "loaded", load_ms, mib, tuple(evicted)
        )
        pending.future.set_result(report)

    def on_load_failed(self, load_id: str, replica_id: str, error: str) -> None:
        pending = self._loads.pop(load_id, None)
        self.table.remove(replica_id)
        if pending is not None:
            pending.future.set_result(LoadReport(replica_id, pending.device_id, False, error))

    def on_unloaded(self, replica_id: str, freed: int) -> None:
        _, future = self._unloads.pop(replica_id, (None, None))
        if future is not None:
            future.set_result(freed)

    def forget_device(self, device_id: str, reason: str) -> tuple[str, ...]:
        """The device's worker is gone: its replicas are no more, its loads fail, its unloads
        are done. Returns the replicas lost (sorted)."""
        lost = tuple(sorted(r for r, (d, _) in self._loaded.items() if d == device_id))
        for replica_id in lost:
            del self._loaded[replica_id]
            self.table.remove(replica_id)
        for load_id, pending in list(self._loads.items()):
            if pending.device_id == device_id:
                del self._loads[load_id]
                self.table.remove(pending.replica_id)
                pending.future.set_result(
                    LoadReport(pending.replica_id, device_id, False, f"worker down: {reason}")
                )
        for replica_id, (holder, future) in list(self._unloads.items()):
            if holder == device_id:
                del self._unloads[replica_id]
                future.set_result(0)
        return lost

    def fail_loads(self, reason: str) -> None:
        """Resolve every pending load as failed (the executor stops)."""
        for pending in self._loads.values():
            pending.future.set_result(
                LoadReport(pending.replica_id, pending.device_id, False, reason)
            )
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
