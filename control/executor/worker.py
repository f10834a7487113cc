"""The worker process: one per device, holding loaded replicas and running their batches.

Started by :class:`control.executor.local.LocalExecutor` with the ``spawn`` context (CUDA cannot
fork; a fresh interpreter also keeps a crash contained). It talks to the executor over one duplex
pipe; messages are tuples ``(kind, ...)`` (see ``_HANDLERS`` and the ``send`` calls).

Threads, and why:

* the main thread runs batches, one at a time, and is the ONLY sender of heartbeats: it sends one
  whenever one is due, while idle and between decode steps (``tick``). A hung step therefore
  stops the heartbeats and the executor sees it within two heartbeat intervals.
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

import gc
import logging
import os
import queue
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from control.executor import transfer
from control.executor.base import Batch, DeviceInfo, InputRef, ItemResult, ModelRef
from control.runtime import clock

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
    if device.cpu_core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {device.cpu_core})
    import torch
    import transformers

    torch.set_num_threads(config.torch_threads)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    Worker(device, conn, config).serve()


class _Ctx:
    """RunContext handed to adapters during one batch."""

    def __init__(self, worker: Worker, started: float) -> None:
        self.worker, self.started = worker, started

    def tick(self) -> None:
        self.worker.maybe_heartbeat()

    def emit_delta(self, item, index: int, text: str) -> None:
        self.worker.send(("delta", item.idempotency_key, item.step, index, text))

    def elapsed_ms(self) -> float:
        return (clock.perf_counter() - self.started) * 1000.0


class Worker:
    def __init__(self, device: DeviceInfo, conn: Any, config: WorkerConfig) -> None:
        import torch

        self.device, self.conn, self.config = device, conn, config
        self.torch_device = torch.device(device.device_id if device.kind == "cuda" else "cpu")
        self.adapters: dict[str, Any] = {}
        self.outputs: OrderedDict[tuple[str, str], dict] = OrderedDict()
        self.send_lock = threading.Lock()
        self.loads: queue.Queue = queue.Queue()
        self.ready: queue.Queue = queue.Queue()
        self.busy = False
        self.last_hb = 0.0
        self.running = True

    # ---- plumbing -----------------------------------------------------------------------------

    def send(self, msg: tuple) -> None:
        with self.send_lock:
            self.conn.send(msg)

    def maybe_heartbeat(self, force: bool = False) -> None:
        now = clock.monotonic()
        if force or now - self.last_hb >= self.config.heartbeat_s:
            self.last_hb = now
            used = sum(a.memory_mib() for a in self.adapters.values())
            self.send(("hb", os.getpid(), self.busy, tuple(sorted(self.adapters)), used))

    def serve(self) -> None:
        threading.Thread(target=self._loader, name="loader", daemon=True).start()
        self.maybe_heartbeat(force=True)
        while self.running:
            try:
                if self.conn.poll(self.config.heartbeat_s / 2):
                    msg = self.conn.recv()
                    self._install_loaded()
                    _HANDLERS[msg[0]](self, *msg[1:])
            except (EOFError, OSError):
                break  # the executor went away: nothing left to serve
            self._install_loaded()
            self.maybe_heartbeat()
        self.loads.put(None)

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
        while True:
            try:
                replica_id, adapter = self.ready.get_nowait()
            except queue.Empty:
                return
            self.adapters[replica_id] = adapter

    def on_load(self, load_id: str, replica_id: str, ref: ModelRef) -> None:
        self.loads.put((load_id, replica_id, ref))

    def on_unload(self, replica_id: str) -> None:
        adapter = self.adapters.pop(replica_id, None)
        freed = adapter.memory_mib() if adapter is not None else 0
        del adapter
        gc.collect()
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

    def on_release(self, run_id: str) -> None:
        for key in [k for k in self.outputs if k[0] == run_id]:
            del self.outputs[key]

    def on_stop(self) -> None:
        self.running = False

    # ---- batches ------------------------------------------------------------------------------

    def on_batch(self, batch: Batch, moved: dict[tuple[str, str, str], Any]) -> None:
        adapter = self.adapters.get(batch.replica_id)
        if adapter is None:
            reason = f"replica {batch.replica_id} is not loaded on {self.device.device_id}"
            self._report(batch, [self._fail(batch, it, reason, True) for it in batch.items])
            return
        from control.executor.adapters.base import PreparedItem

        prepared, results = [], {}
        for it in batch.items:
            try:
                prepared.append(PreparedItem(it, self._resolve(it.inputs, moved)))
            except KeyError as err:
                results[it.idempotency_key] = self._fail(batch, it, f"input lost: {err}", True)
        self.busy = True
        started = clock.perf_counter()
        try:
            outs = adapter.run(prepared, _Ctx(self, started)) if prepared else []
            if self.torch_device.type == "cuda":
                import torch

                torch.cuda.synchronize(self.torch_device)
        except Exception as err:  # a failed batch fails its items; the worker lives on
            log.exception("batch %s failed", batch.batch_id)
            reason = f"{type(err).__name__}: {err}"
            for p in prepared:
                results[p.item.idempotency_key] = self._fail(batch, p.item, reason, True)
            outs = []
        finally:
            self.busy = False
        device_ms = (clock.perf_counter() - started) * 1000.0
        for p, out in zip(prepared, outs, strict=False):  # outs is empty after a failure
            results[p.item.idempotency_key] = self._result(batch, p.item, out, device_ms)
        self._report(batch, [results[it.idempotency_key] for it in batch.items])

    def _resolve(self, inputs, moved) -> dict[str, Any]:
        resolved = {}
        for name, value in inputs.items():
            if isinstance(value, InputRef):
                key = (value.run_id, value.node_id, value.field)
                if key in moved:
                    value = transfer.unpack(moved[key])
                else:
                    held = self.outputs.get(key[:2])
                    if held is None or value.field not in held:
                        raise KeyError(f"{value.run_id}/{value.node_id}.{value.field}")
                    value = held[value.field]
            resolved[name] = value
        return resolved

    def _result(self, batch: Batch, item, out, device_ms: float) -> ItemResult:
        base = self._fail(batch, item, out.error, False)
        if out.error is not None:
            return base
        self.outputs[(item.step.run_id, item.step.node_id)] = out.value
        while len(self.outputs) > self.config.max_held_outputs:
            self.outputs.popitem(last=False)
        return replace(
            base,
            ok=True,
            input_tokens=out.input_tokens,
            output_tokens=out.output_tokens,
            device_ms=device_ms,
            first_token_ms=out.first_token_ms,
            prefix_hit_tokens=out.prefix_hit_tokens,
            label=out.label,
            item_count=out.item_count,
        )

    def _fail(self, batch: Batch, item, reason: str | None, retriable: bool) -> ItemResult:
        return ItemResult(
            step=item.step,
            idempotency_key=item.idempotency_key,
            replica_id=batch.replica_id,
            device_id=self.device.device_id,
            ok=False,
            error=reason,
            retriable=retriable,
            batch_size=len(batch.items),
        )

    def _report(self, batch: Batch, results: list[ItemResult]) -> None:
        self.send(("results", batch.batch_id, results))
        self.maybe_heartbeat()


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
