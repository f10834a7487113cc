"""The worker process: one per device, holding loaded replicas and running their batches.

Started by :class:`control.executor.local.LocalExecutor` with the ``spawn`` context (CUDA cannot
fork; a fresh interpreter also keeps a crash contained). It talks to the executor over one duplex
pipe; messages are tuples ``(kind, ...)`` (see ``_HANDLERS`` and the ``send`` calls).

Threads, and why:

* the main thread runs the messages of the inbox in order (batches one at a time, unloads,
  exports); before a batch it sends ``("started", batch_id)`` so the executor can time it
  against the batch's progress deadline (a batch still running past it counts as hung),
  unless the batch message says not to (``announce`` False: the executor sent it to an idle
  worker and timed it from its send, sparing a message per batch on the common path). The
  one exception is continuous batching: while a generate replica's decode loop runs, batches
  for the same replica at the head of the inbox join it at step boundaries (each ``started``
  when it joins, reported when its own items are done); anything else at the head ends
  joining (see :mod:`worker_batches`);
* the main thread also reads the pipe: while idle it waits in ``recv`` itself, so a batch
  that reaches an idle worker starts on the thread that woke for it (no hand-over between
  threads: on the worker's one pinned core each wake-up and GIL hand-over was ~50 us on every
  batch's way). After each message it queues whatever else waits in the pipe in the
  :class:`~control.executor.inbox.Inbox` (without waiting for more), handling a ``cancel`` at
  once, so items of batches that have not started can be taken out and reported
  ``cancelled`` before the next one starts. While it runs a batch, nobody waits on the pipe:
  the next message is read when the batch ends (a decode loop reads at every step boundary,
  see :mod:`worker_batches`), or by the heartbeat thread at its next beat (below);
* a heartbeat thread sends a heartbeat every interval. It is separate from the main thread
  because one forward pass of an encoder cannot tick: a long batch must not look like death.
  Heartbeats therefore prove the PROCESS is alive (a crash stops them and closes the pipe);
  a hung BATCH is caught by its deadline instead. torch releases the GIL while it computes,
  and Python switches threads every few ms otherwise, so a busy main thread does not starve it.
  At each beat that finds the main thread busy (not reading) it also queues what waits in the
  pipe, so a ``cancel`` of queued items is answered within a beat even behind a long batch;
* a loader thread loads models (reads weights, builds the adapter, measures time and memory).
  Loading is the cold path: it runs beside the hot replicas instead of in front of them, and
  needs no hand-over between processes because the weights land in this worker's own memory (on
  CUDA, in its own context). torch and safetensors release the GIL while reading and computing,
  so a batch running during a load is slowed by the shared core, not stopped. A separate loader
  process would avoid even that, at the price of copying every model across processes.

Outputs of finished steps stay here, keyed by (run id, node id), until ``release`` or until the
bound on held outputs pushes the oldest out; other workers receive them through ``export``.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import select
import signal
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from control import clock
from control.executor import transfer
from control.executor.base import DeviceInfo, ModelRef
from control.executor.heap import freeze_heap, thaw_heap
from control.executor.inbox import Inbox
from control.executor.worker_batches import BatchMixin

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerConfig:
    heartbeat_s: float = 0.5  # interval between heartbeats; down after two missed
    cache_dir: str = "var/models"  # converted and tiny models are kept here
    torch_threads: int = 1  # torch threads in this worker (1: predictable CPU latency)
    max_held_outputs: int = 10_000  # outputs kept for later steps before the oldest are dropped


def worker_main(device: DeviceInfo, conn: Any, config: WorkerConfig) -> None:
    """Entry point of the worker process; returns when told to stop or the pipe closes."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # Ctrl-C in a terminal reaches the whole process group: the executor, not the worker,
    # decides when a worker stops (it sends "stop", or kills a hung one).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if device.cpu_core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {device.cpu_core})
    import torch
    import transformers

    torch.set_num_threads(config.torch_threads)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    # Import the adapters (transformers model classes, tokenizers) now, inside the start-up
    # grace period: imported later by the loader thread, they hold the import lock and the
    # GIL in long stretches (loading extension modules), which on a loaded machine starved
    # the heartbeat thread past two intervals and got a healthy worker killed as hung.
    import control.executor.adapters  # noqa: F401

    freeze_heap()  # the worker's libraries stay out of full collections (control.executor.heap)
    Worker(device, conn, config).serve()


class Worker(BatchMixin):
    def __init__(self, device: DeviceInfo, conn: Any, config: WorkerConfig) -> None:
        import torch

        self.device, self.conn, self.config = device, conn, config
        self.torch_device = torch.device(device.device_id if device.kind == "cuda" else "cpu")
        self.adapters: dict[str, Any] = {}
        self.outputs: OrderedDict[tuple[str, str], dict] = OrderedDict()
        self.send_lock = threading.Lock()
        self.loads: queue.Queue = queue.Queue()
        self.ready: queue.Queue = queue.Queue()
        self.inbox = Inbox()
        # Held by whichever thread reads the pipe (a message is read whole by one thread);
        # the main thread holds it while it waits in recv, so the heartbeat thread then skips.
        self.reading = threading.Lock()
        self._poller: Any = None  # select.poll on the pipe, from serve() on
        self.busy = False
        self.running = True
        self.stopped = threading.Event()

    # ---- plumbing -----------------------------------------------------------------------------

    def send(self, msg: tuple) -> None:
        # pickled by plain pickle and framed by send_bytes, as Connection.send would frame it
        # (the executor's recv reads it unchanged), without ForkingPickler's copy of the whole
        # copyreg table per message (see control.executor.sender.frame)
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        with self.send_lock:
            self.conn.send_bytes(data)

    def heartbeat(self) -> None:
        adapters = list(self.adapters.items())  # a copy: the main thread may change the dict
        used = sum(a.memory_mib() for _, a in adapters)
        self.send(("hb", os.getpid(), self.busy, tuple(sorted(r for r, _ in adapters)), used))

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
            pass  # the executor went away: nothing left to serve
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
        if msg[0] == "cancel":
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
            if msg[0] == "cancel":
                self._cancel(msg[1])
            else:
                self.inbox.put(msg)

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
                self.inbox.put(("stop",))  # the pipe closed: the main thread stops in order
                return

    def _cancel(self, keys) -> None:  # noqa: ANN001
        for c in self.inbox.cancel(keys):
            results = [
                self._fail(c.batch, it, "cancelled before it started", False, "cancelled")
                for it in c.items
            ]
            self.send(("cancelled", c.batch.batch_id, results, c.remaining))

    # ---- loading ------------------------------------------------------------------------------

    def _loader(self) -> None:
        from control.executor.adapters import build_adapter

        while (job := self.loads.get()) is not None:
            load_id, replica_id, ref = job
            started = clock.perf_counter()
            try:
                adapter = build_adapter(ref, self.torch_device, _cache_dir(self.config))
            except Exception as err:  # any load failure is reported, the worker lives on
                log.exception("load of %s failed", replica_id)
                self.send(("load_failed", load_id, replica_id, f"{type(err).__name__}: {err}"))
                continue
            load_ms = (clock.perf_counter() - started) * 1000.0
            # Install before reporting, so a batch sent after the report finds the replica.
            self.ready.put((replica_id, adapter))
            self.send(("loaded", load_id, replica_id, load_ms, adapter.memory_mib()))

    def _install_loaded(self) -> None:
        while not self.ready.empty():  # checked first: an exception per message cost more
            replica_id, adapter = self.ready.get_nowait()
            self.adapters[replica_id] = adapter
            freeze_heap()  # the new model's objects join the frozen start-up heap

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
        self.send(("unloaded", replica_id, freed))

    # ---- outputs ------------------------------------------------------------------------------

    def on_export(self, request_id: str, run_id: str, node_id: str, field: str) -> None:
        held = self.outputs.get((run_id, node_id))
        if held is None or field not in held:
            self.send(("exported", request_id, None, f"output {run_id}/{node_id}.{field} not held"))
            return
        self.send(("exported", request_id, transfer.pack(held[field]), None))

    def on_fetch(self, request_id: str, run_id: str, node_id: str) -> None:
        held = self.outputs.get((run_id, node_id))
        error = None if held is not None else f"output {run_id}/{node_id} not held"
        self.send(("fetched", request_id, transfer.to_plain(held), error))

    def on_release(self, *run_ids: str) -> None:
        """Drop the outputs of finished runs (one message may name several)."""
        gone = set(run_ids)
        for key in [k for k in self.outputs if k[0] in gone]:
            del self.outputs[key]

    def on_stop(self) -> None:
        self.running = False


def _cache_dir(config: WorkerConfig):
    from pathlib import Path

    return Path(config.cache_dir)


_HANDLERS = {
    "load": Worker.on_load,
    "unload": Worker.on_unload,
    "batch": Worker.on_batch,
    "export": Worker.on_export,
    "fetch": Worker.on_fetch,
    "release": Worker.on_release,
    "stop": Worker.on_stop,
}
