"""The device actor: one Ray actor per device, holding its replicas and running their batches.

The process around the model differs from a local worker's (a Ray actor instead of a spawned
process and a pipe); the model code does not: the actor builds the same adapters
(:func:`~control.executor.adapters.build_adapter`) and runs batches through the same
:class:`~control.executor.worker.batches.BatchRunner` and
:class:`~control.executor.worker.payloads.HeldOutputs` as a local worker.

Methods and their concurrency groups (Ray runs the methods of one group in call order):

* default group (one at a time, in order): ``run``, ``stream`` (``run`` for a batch whose text
  streams: a generator, :mod:`.streams`), ``export``, ``fetch``, ``release``, ``unload``; like
  a local worker's main thread, so an export or fetch sees every output of the batches called
  before it;
* ``load`` (one at a time): loading runs beside the hot replicas, as a local worker's loader
  thread does; the replica is installed when the load returns;
* ``ctl``: ``status`` answers while a batch runs (the executor's heartbeat). It raises
  :class:`NodeLost` once the actor's raylet is gone (its node was killed; the process lives on
  for up to a second before Ray's own check of its parent ends it, and would answer meanwhile).

Inputs held by another actor arrive as top-level arguments of ``run`` (Ray resolves each from
its object reference before the call: the data moves producer -> object store -> consumer,
never through the driver); each item's result says how many bytes arrived that way (the batch
runner measures them, as on a local worker). Tensors stay tensors on the way (Ray serialises
them itself).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from control.clock import SYSTEM_CLOCK
from control.executor.protocol import Batch, DeviceInfo, ModelRef, wire

#: Concurrency groups of the actor class (see the module docstring).
CONCURRENCY_GROUPS = {"load": 1, "ctl": 1}


class Missing:
    """What ``export`` gives for an output this actor does not hold (the consumer's item then
    fails ``unavailable`` naming the lost node, as on a local worker)."""

    def __reduce__(self):  # noqa: ANN204
        return (Missing, ())


class NodeLost(Exception):
    """The actor's raylet is gone: its node left the cluster (the executor judges it lost)."""


def _parent_raylet() -> int:
    """The raylet's pid when it is this process's parent, else 0 (a worker started through a
    wrapper, e.g. in a container: not checked)."""
    parent = os.getppid()
    return parent if parent == int(os.environ.get("RAY_RAYLET_PID") or 0) else 0


def _raylet_gone(raylet_pid: int) -> bool:
    """Whether this process lost its parent raylet: it was re-parented when the raylet died."""
    return raylet_pid > 0 and os.getppid() != raylet_pid


class DeviceActor:
    """The body of one device's actor (the Ray class is built in :mod:`.cluster`)."""

    def __init__(self, device: DeviceInfo, cache_dir: str, torch_threads: int, max_held: int):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch

        torch.set_num_threads(torch_threads)
        import control.executor.adapters  # noqa: F401  (imported now, not by the first load)
        from control.executor.worker import payloads
        from control.executor.worker.batches import BatchRunner

        self.device = device
        self.raylet_pid = _parent_raylet()
        # Ray gives a GPU actor its device as the only visible one: cuda:0 inside the actor.
        self.torch_device = torch.device("cuda:0" if device.kind == "cuda" else "cpu")
        self.cache_dir = Path(cache_dir)
        self.adapters: dict[str, Any] = {}
        self.outputs = payloads.HeldOutputs(max_held)
        self._sent: list[tuple] = []
        self._busy = threading.Event()
        self.batches = BatchRunner(device, self.torch_device, self.adapters, self.outputs,
                                   self._sent.append, _nothing_joins, SYSTEM_CLOCK)  # fmt: skip

    # ---- ctl group

    def status(self) -> tuple[int, bool, tuple[str, ...], int]:
        """(pid, busy, replica ids, used MiB): the heartbeat of a local worker. Raises
        :class:`NodeLost` when its node is gone."""
        if _raylet_gone(self.raylet_pid):
            raise NodeLost(f"the raylet of its node (pid {self.raylet_pid}) is gone")
        adapters = list(self.adapters.items())
        used = sum(a.memory_mib() for _, a in adapters)
        return os.getpid(), self._busy.is_set(), tuple(sorted(r for r, _ in adapters)), used

    # ---- load group

    def load(self, replica_id: str, ref: ModelRef) -> tuple[float, int]:
        """Build the replica's adapter and run its warm-up pass (``adapters.warmup``); (load
        ms, MiB). Raises what the load raised."""
        from control.executor.adapters import build_adapter
        from control.executor.adapters.warmup import warm_up

        started = SYSTEM_CLOCK.perf_counter()
        adapter = build_adapter(ref, self.torch_device, self.cache_dir)
        warm_up(adapter, ref.task)  # before it answers: the first request pays no first call
        self.adapters[replica_id] = adapter
        return (SYSTEM_CLOCK.perf_counter() - started) * 1000.0, adapter.memory_mib()

    # ---- default group

    def unload(self, replica_id: str) -> int:
        adapter = self.adapters.pop(replica_id, None)
        freed = adapter.memory_mib() if adapter is not None else 0
        del adapter
        if self.torch_device.type == "cuda":
            import torch

            torch.cuda.empty_cache()
        return freed

    def run(self, batch: Batch, keys: tuple, *values: Any) -> list[tuple]:
        """Run ``batch``; ``values[i]`` is the input ``keys[i]`` (run, node, field) moved here
        from another actor. Returns the messages a local worker would send for it (results,
        each with the bytes moved to it, and streamed text)."""
        moved = {k: v for k, v in zip(keys, values, strict=True) if not isinstance(v, Missing)}
        self._sent.clear()
        self._busy.set()
        try:
            self.batches.run(batch, moved, announce=False)
        finally:
            self._busy.clear()
        sent = [m for m in self._sent if m[0] in (wire.RESULTS, wire.DELTA)]
        self._sent.clear()
        return sent

    def stream(self, batch: Batch, keys: tuple, *values: Any) -> Iterator[tuple[list, bool]]:
        """``run`` for a batch whose text streams (a Ray streaming generator, see
        :mod:`.streams`): yields ``(deltas, False)`` as the model produces text, then once
        ``(what run returns, True)``. The batch runs on a thread of its own meanwhile (a generator cannot
        yield from inside the model's callback); this method still holds the default group, so
        nothing else runs on the replicas until it ends, as for ``run``."""
        moved = {k: v for k, v in zip(keys, values, strict=True) if not isinstance(v, Missing)}
        produced: queue.SimpleQueue = queue.SimpleQueue()
        done = object()

        def work() -> None:
            try:
                self.batches.run(batch, moved, announce=False)
            except BaseException as err:  # noqa: BLE001 (raised below, as run would)
                produced.put(err)
            finally:
                produced.put(done)

        # The runner's messages go to the queue for this batch only (``run``'s list otherwise:
        # the default group runs one method at a time, so nothing else sends meanwhile).
        self.batches.send = produced.put
        self._busy.set()
        try:
            threading.Thread(target=work, name=f"batch-{batch.batch_id}", daemon=True).start()
            pending: list[tuple] = []  # messages not yet yielded
            while True:
                chunk = [produced.get()]
                while not produced.empty():  # what came meanwhile goes in one value
                    chunk.append(produced.get_nowait())
                for msg in chunk:
                    if isinstance(msg, BaseException):
                        raise msg
                    if msg is not done and msg[0] in (wire.RESULTS, wire.DELTA):
                        pending.append(msg)
                if any(msg is done for msg in chunk):
                    break
                if pending and pending[-1][0] == wire.DELTA:  # results go with the last value
                    yield pending, False
                    pending = []
        finally:
            self._busy.clear()
            self.batches.send = self._sent.append
        yield pending, True

    def export(self, run_id: str, node_id: str, field: str) -> Any:
        """One field of a held output, as it is (a tensor stays a tensor), or :class:`Missing`."""
        held = self.outputs.get(run_id, node_id)
        if held is None or field not in held:
            return Missing()
        return held[field]

    def fetch(self, run_id: str, node_id: str) -> dict | None:
        """A plain copy of a held output (tensors as lists), or None when not held."""
        from control.executor.worker import payloads

        held = self.outputs.get(run_id, node_id)
        return None if held is None else payloads.to_plain(held)

    def release(self, *run_ids: str) -> None:
        self.outputs.release(set(run_ids))


def _nothing_joins(replica_id: str) -> list[tuple]:
    """Batches that may join a running decode loop: none here (each ``run`` is one call)."""
    return []
