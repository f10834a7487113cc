"""The loading half of :class:`~control.executor.local.LocalExecutor`: loading and unloading
replicas, and making room for them by evicting least-recently-used idle ones (see
:class:`~control.executor.lru.ReplicaTable`).

Everything here runs under the executor's lock, from a public method (driver thread) or from
the pump thread (the worker's ``loaded``, ``load_failed`` and ``unloaded`` replies). Kept apart
from ``local.py`` only to keep modules small.
"""

from __future__ import annotations

import concurrent.futures
from pathlib import Path

from control import clock
from control.executor.base import ExecutorError, LoadReport, ModelRef, ReplicaEvicted
from control.executor.config import _PendingLoad, estimate_mib
from control.executor.supervisor import WorkerHandle


class LoadingMixin:
    """Replica loading of :class:`~control.executor.local.LocalExecutor` (uses its ``_lock``,
    ``_replicas``, ``_loads``, ``_unloads``, ``_table``, ``_workers``, ``_send`` and ``_emit``)."""

    def load(
        self, replica_id: str, model_ref: ModelRef, device_id: str
    ) -> concurrent.futures.Future:
        """Load a replica on a device, evicting LRU idle replicas if its memory needs room.

        Returns a future of a LoadReport (ok=False with a reason when it does not fit or fails).
        """
        future: concurrent.futures.Future = concurrent.futures.Future()
        handle = self._worker(device_id)
        need = model_ref.expected_mib or estimate_mib(model_ref, Path(self.config.cache_dir))
        with self._lock:
            if replica_id in self._replicas or replica_id in {
                p.replica_id for p in self._loads.values()
            }:
                raise ExecutorError(f"replica_id {replica_id!r} is already loaded or loading")
            plan = self._table.plan(device_id, need, handle.device.memory_budget_mib)
            if not plan.fits:
                future.set_result(LoadReport(replica_id, device_id, False, plan.reason))
                return future
            for victim in plan.evict:
                self._evict(victim, f"LRU: making room for {replica_id} ({need} MiB)")
            load_id = f"load-{next(self._ids)}"
            self._loads[load_id] = _PendingLoad(
                future, replica_id, device_id, model_ref, plan.evict
            )
            # Reserve the memory now (in flight, so never evicted while it loads).
            self._table.add(replica_id, device_id, need, clock.monotonic())
            self._table.touch(replica_id, clock.monotonic(), +1)
            self._send(handle, ("load", load_id, replica_id, model_ref))
        return future

    def unload(self, replica_id: str) -> concurrent.futures.Future:
        """Unload a replica; the future gives the MiB its worker freed."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if replica_id not in self._replicas:
                raise ExecutorError(f"replica_id {replica_id!r} is not loaded")
            device_id, _ = self._replicas.pop(replica_id)
            self._table.remove(replica_id)
            self._unloads[replica_id] = (device_id, future)
            self._send(self._workers[device_id], ("unload", replica_id))
        return future

    def _evict(self, replica_id: str, reason: str) -> None:
        device_id, _ = self._replicas.pop(replica_id)
        entry = self._table.remove(replica_id)
        self._send(self._workers[device_id], ("unload", replica_id))
        freed = entry.memory_mib if entry else 0
        self._emit(ReplicaEvicted(replica_id, device_id, freed, reason))

    def _on_loaded(
        self, handle: WorkerHandle, load_id: str, replica_id: str, load_ms: float, mib: int
    ) -> None:
        pending = self._loads.pop(load_id, None)
        if pending is None:
            return
        now = clock.monotonic()
        self._table.remove(replica_id)
        # Account what the caller planned for when that is more (KV cache, activations).
        self._table.add(replica_id, pending.device_id, max(mib, pending.ref.expected_mib or 0), now)
        self._replicas[replica_id] = (pending.device_id, pending.ref)
        evicted = list(pending.evicted)
        # The estimate may have been low: if the real size overflows the budget, evict more.
        if self._table.used_mib(pending.device_id) > handle.device.memory_budget_mib:
            plan = self._table.plan(
                pending.device_id, 0, handle.device.memory_budget_mib, keep=frozenset({replica_id})
            )
            for victim in plan.evict:
                self._evict(victim, f"LRU: {replica_id} took {mib} MiB, more than planned")
                evicted.append(victim)
        report = LoadReport(
            replica_id, pending.device_id, True, "loaded", load_ms, mib, tuple(evicted)
        )
        pending.future.set_result(report)

    def _on_load_failed(
        self, handle: WorkerHandle, load_id: str, replica_id: str, error: str
    ) -> None:
        pending = self._loads.pop(load_id, None)
        self._table.remove(replica_id)
        if pending is not None:
            pending.future.set_result(LoadReport(replica_id, pending.device_id, False, error))

    def _on_unloaded(self, handle: WorkerHandle, replica_id: str, freed: int) -> None:
        _, future = self._unloads.pop(replica_id, (None, None))
        if future is not None:
            future.set_result(freed)
