"""The worker process: one per device, holding loaded replicas and running their batches.

Started by the host through :func:`~control.executor.worker.main.worker_main`. It talks to the
host over one duplex pipe in the messages of :mod:`control.executor.protocol.wire`.

Threads, and why:

* the main thread runs the messages of the inbox in order (batches one at a time, unloads,
  exports; see :mod:`.batches` for batches, and for the one exception: batches of a generate
  replica joining its running decode loop at step boundaries);
* the main thread also reads the pipe: while idle it waits in ``recv`` itself, so a batch
  that reaches an idle worker starts on the thread that woke for it (no hand-over between
  threads: on the worker's one pinned core each wake-up and GIL hand-over was ~50 us on every
  batch's way). After each message it queues whatever else waits in the pipe in the
  :class:`~control.executor.worker.inbox.Inbox` (without waiting for more), handling a
  ``cancel`` at once, so items of batches that have not started can be taken out and reported
  ``cancelled`` before the next one starts. While it runs a batch, nobody waits on the pipe:
  the next message is read when the batch ends (a decode loop reads at every step boundary),
  or by the heartbeat thread at its next beat (below);
* a heartbeat thread sends a heartbeat every interval. It is separate from the main thread
  because one forward pass of an encoder cannot tick: a long batch must not look like death.
  Heartbeats therefore prove the PROCESS is alive (a crash stops them and closes the pipe);
  a hung BATCH is caught by its deadline instead. torch releases the GIL while it computes,
  and Python switches threads every few ms otherwise, so a busy main thread does not starve it.
  At each beat that finds the main thread busy (not reading) it also queues what waits in the
  pipe, so a ``cancel`` of queued items is answered within a beat even behind a long batch;
* a loader thread loads models (reads weights, builds the adapter, runs one warm-up forward
  pass through it (:mod:`~control.executor.adapters.warmup`), measures time and memory).
  Loading is the cold path: it runs beside the hot replicas instead of in front of them, and
  needs no hand-over between processes because the weights land in this worker's own memory (on
  CUDA, in its own context). torch and safetensors release the GIL while reading and computing,
  so a batch running during a load is slowed by the shared core, not stopped.

Outputs of finished steps stay here (:class:`~control.executor.worker.payloads.HeldOutputs`)
until ``release`` or the bound on held outputs; other workers receive them through ``export``.
"""

from __future__ import annotations

import logging
import os
import queue
import select
import threading
from pathlib import Path
from typing import Any

from control.clock import SYSTEM_CLOCK, Clock
from control.executor.heap import freeze_heap, thaw_heap
from control.executor.protocol import Batch, DeviceInfo, ModelRef, wire
from control.executor.worker import payloads
from control.executor.worker.batches import BatchRunner, failed
from control.executor.worker.inbox import Inbox
from control.executor.worker.main import WorkerConfig

log = logging.getLogger(__name__)


class Worker:
    """One device's worker; ``clock`` times batches and loads (the system clock in a worker
    process, see ``worker_main``; tests running a worker in-process may give their own)."""

    def __init__(
        self, device: DeviceInfo, conn: Any, config: WorkerConfig, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        import torch

        self.device, self.conn, self.config, self.clock = device, conn, config, clock
        self.torch_device = torch.device(device.device_id if device.kind == "cuda" else "cpu")
        self.adapters: dict[str, Any] = {}
        self.outputs = payloads.HeldOutputs(config.max_held_outputs)
        self.send_lock = threading.Lock()
        self.loads: queue.Queue = queue.Queue()
        self.ready: queue.Queue = queue.Queue()
        self.inbox = Inbox()
        # Held by whichever thread reads the pipe (a message is read whole by one thread);
        # the main thread holds it while it waits in recv, so the heartbeat thread then skips.
        self.reading = threading.Lock()
        self._poller: Any = None  # select.poll on the pipe, from serve() on
        self.batches = BatchRunner(device, self.torch_device, self.adapters, self.outputs,
                                   self.send, self._joinable, clock)  # fmt: skip
        self.running = True
        self.stopped = threading.Event()

    @property
    def busy(self) -> bool:
        """A batch runs on the main thread now."""
        return self.batches.busy

    # ---- plumbing -----------------------------------------------------------------------------

    def send(self, msg: tuple) -> None:
        # framed by send_bytes as Connection.send would frame it (the host's recv reads it)
        data = wire.encode(msg)
        with self.send_lock:
            self.conn.send_bytes(data)

    def heartbeat(self) -> None:
        adapters = list(self.adapters.items())  # a copy: the main thread may change the dict
        used = sum(a.memory_mib() for _, a in adapters)
        replicas = tuple(sorted(r for r, _ in adapters))
        self.send((wire.HEARTBEAT, os.getpid(), self.busy, replicas, used))

    def serve(self) -> None:
        """Start the helper threads, then run messages in order until ``stop`` or a closed pipe."""
        self._poller = select.poll()
        self._poller.register(self.conn.fileno(), select.POLLIN)
        self.heartbeat()
        helpers = [threading.Thread(target=target, name=name, daemon=True)
                   for target, name in ((self._loader, "loader"), (self._beat, "heartbeat"))]  # fmt: skip
        for thread in helpers:
            thread.start()
        try:
            while self.running:
                msg = self._next()
                self._install_loaded()
                if msg is not None:
                    _HANDLERS[msg[0]](self, *msg[1:])
                    with self.reading:
                        self.take_waiting()
        except (EOFError, OSError):
            pass  # the host went away: nothing left to serve
        finally:
            self.stopped.set()
            self.loads.put(None)
            # The helpers end before the interpreter does: a daemon thread still alive at
            # shutdown is torn down inside native code and aborts the process (SIGABRT).
            for thread in helpers:
                thread.join(timeout=5.0)

    def _next(self) -> tuple | None:
        """The oldest queued message, else the next one from the pipe (waiting for it at most
        a heartbeat interval, the worker being idle); None for a ``cancel`` (handled here) or
        when nothing came: the serve loop then installs models the loader finished (a load
        that ends while the worker idles must reach the heartbeats' replica list and memory
        figure without waiting for the next message) and checks ``running``. Raises EOFError
        or OSError when the pipe closes."""
        msg = self.inbox.pop()
        if msg is not None:
            return msg
        with self.reading:
            msg = self.inbox.pop()  # the heartbeat thread may have queued some meanwhile
            if msg is None:
                if not self._poller.poll(self.config.heartbeat_s * 1000):
                    return None
                msg = self.conn.recv()
        if msg[0] == wire.CANCEL:
            self._cancel(msg[1])
            return None
        return msg

    def take_waiting(self) -> None:
        """Queue every message waiting in the pipe now, handling a ``cancel`` at once; never
        waits for more. Only with ``reading`` held; nothing to do before ``serve``."""
        if self._poller is None:
            return
        while self._poller.poll(0):  # a frame started: recv reads it to its end
            msg = self.conn.recv()
            if msg[0] == wire.CANCEL:
                self._cancel(msg[1])
            else:
                self.inbox.put(msg)

    def _joinable(self, replica_id: str) -> list[tuple]:
        """The batch messages for ``replica_id`` at the head of the inbox, taken out, after
        queueing what reached the pipe since the last decode step (see :mod:`.batches`)."""
        with self.reading:
            self.take_waiting()
        found = []
        while (msg := self.inbox.take_if(lambda m: _joins(m, replica_id))) is not None:
            found.append(msg)
        return found

    def _beat(self) -> None:
        """Heartbeat thread: one heartbeat per interval while the worker serves; then, if the
        main thread is busy (not reading), queue what waits in the pipe (see the module)."""
        while not self.stopped.wait(self.config.heartbeat_s):
            try:
                self.heartbeat()
                if self.reading.acquire(blocking=False):
                    try:
                        self.take_waiting()
                    finally:
                        self.reading.release()
            except (EOFError, OSError):
                self.inbox.put((wire.STOP,))  # the pipe closed: the main thread stops in order
                return

    def _cancel(self, keys) -> None:  # noqa: ANN001
        for c in self.inbox.cancel(keys):
            dev = self.device.device_id
            results = [failed(c.batch, it, dev, "cancelled before it started", False, "cancelled")
                       for it in c.items]  # fmt: skip
            self.send((wire.CANCELLED, c.batch.batch_id, results, c.remaining))

    # ---- loading ------------------------------------------------------------------------------

    def _loader(self) -> None:
        from control.executor.adapters import build_adapter
        from control.executor.adapters.warmup import warm_up

        while (job := self.loads.get()) is not None:
            load_id, replica_id, ref = job
            started = self.clock.perf_counter()
            try:
                adapter = build_adapter(ref, self.torch_device, Path(self.config.cache_dir))
            except Exception as err:  # any load failure is reported, the worker lives on
                log.exception("load of %s failed", replica_id)
                self.send((wire.LOAD_FAILED, load_id, replica_id, f"{type(err).__name__}: {err}"))
                continue
            warm_up(adapter, ref.task)  # before the report: the first request pays no first call
            load_ms = (self.clock.perf_counter() - started) * 1000.0
            # Install before reporting, so a batch sent after the report finds the replica.
            self.ready.put((replica_id, adapter))
            self.send((wire.LOADED, load_id, replica_id, load_ms, adapter.memory_mib()))

    def _install_loaded(self) -> None:
        while not self.ready.empty():  # checked first: an exception per message cost more
            replica_id, adapter = self.ready.get_nowait()
            self.adapters[replica_id] = adapter
            freeze_heap()  # the new model's objects join the frozen start-up heap

    # ---- messages -----------------------------------------------------------------------------

    def on_load(self, load_id: str, replica_id: str, ref: ModelRef) -> None:
        self.loads.put((load_id, replica_id, ref))

    def on_unload(self, replica_id: str) -> None:
        adapter = self.adapters.pop(replica_id, None)
        freed = adapter.memory_mib() if adapter is not None else 0
        del adapter
        thaw_heap()  # the model's cycles were frozen with it: a full collection frees them
        freeze_heap()
        if self.torch_device.type == "cuda":
            import torch

            torch.cuda.empty_cache()
        self.send((wire.UNLOADED, replica_id, freed))

    def on_batch(self, batch: Batch, moved: dict, announce: bool = True) -> None:
        self.batches.run(batch, moved, announce)

    def on_export(self, request_id: str, run_id: str, node_id: str, field: str) -> None:
        held = self.outputs.get(run_id, node_id)
        if held is None or field not in held:
            error = f"output {run_id}/{node_id}.{field} not held"
            self.send((wire.EXPORTED, request_id, None, error))
            return
        self.send((wire.EXPORTED, request_id, payloads.pack(held[field]), None))

    def on_fetch(self, request_id: str, run_id: str, node_id: str) -> None:
        held = self.outputs.get(run_id, node_id)
        error = None if held is not None else f"output {run_id}/{node_id} not held"
        self.send((wire.FETCHED, request_id, payloads.to_plain(held), error))

    def on_release(self, *run_ids: str) -> None:
        """Drop the outputs of finished runs (one message may name several)."""
        self.outputs.release(set(run_ids))

    def on_stop(self) -> None:
        self.running = False


def _joins(msg: tuple, replica_id: str) -> bool:
    return msg[0] == wire.BATCH and msg[1].replica_id == replica_id


_HANDLERS = {
    wire.LOAD: Worker.on_load,
    wire.UNLOAD: Worker.on_unload,
    wire.BATCH: Worker.on_batch,
    wire.EXPORT: Worker.on_export,
    wire.FETCH: Worker.on_fetch,
    wire.RELEASE: Worker.on_release,
    wire.STOP: Worker.on_stop,
}
