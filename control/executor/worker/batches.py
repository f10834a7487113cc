"""Running batches inside a worker process (the main thread's hot path).

:meth:`BatchRunner.run` resolves each item's inputs (literals, outputs this worker holds, or
values moved here from another worker), tells the host the batch has ``started`` (its hang
deadline starts then; not for a batch the host sent to an idle worker and timed itself), runs
the replica's adapter once for the whole batch, keeps each successful output for later steps,
and reports one :class:`ItemResult` per item with a structured cause for failures.

One item's bad input never fails the others: adapters refuse unusable inputs per item (the
item's ``bad_input``), and a batch that still raises has its items run again one by one to find
the one to blame (:func:`~control.executor.worker.isolate.isolate`). A decode loop (continuous
batching) is not run again item by item (its items may have streamed text already); its inputs
are checked before it starts.

Continuous batching. An adapter with ``run_continuous`` (generate) runs a decode loop that other
batches of the SAME replica join at step boundaries. It takes them through ``joinable``, which
hands over only batches at the head of the worker's inbox: messages still run in arrival order,
so a batch for another replica, a load, unload, export or stop that arrives ends joining
(everything after it waits behind it anyway); the loop then finishes the rows it has and the
worker moves on. How many rows join is the core's business (it keeps a replica's batches within
its ``max_batch_size``); the worker takes what is waiting, so it never waits on itself. Each
batch is its own :class:`_Running`: ``started`` when it joins, reported (with its own
``device_ms`` and first token time, measured from its join) as soon as its items are done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from control.clock import Clock
from control.executor.adapters.base import PreparedItem
from control.executor.protocol import Batch, BatchItem, DeviceInfo, InputRef, ItemResult, wire
from control.executor.worker import payloads
from control.executor.worker.isolate import isolate, printable

log = logging.getLogger(__name__)


class _Ctx:
    """RunContext of one batch: its clock starts when the batch started (or joined)."""

    def __init__(self, runner: BatchRunner, started: float) -> None:
        self.runner, self.started = runner, started

    def tick(self) -> None:
        pass  # heartbeats come from their own thread; a tick is only a safe point

    def emit_delta(self, item: BatchItem, index: int, text: str) -> None:
        self.runner.send((wire.DELTA, item.idempotency_key, item.step, index, text))

    def elapsed_ms(self) -> float:
        return (self.runner.perf_counter() - self.started) * 1000.0


class LostInput(KeyError):
    """An input of an item that this worker no longer holds (its output went with a worker
    that died); ``node_id`` names the executor node whose output is gone."""

    def __init__(self, ref: InputRef) -> None:
        super().__init__(f"{ref.run_id}/{ref.node_id}.{ref.field}")
        self.node_id = ref.node_id


class _Running:
    """One batch from ``started`` to its report: the BatchGroup an adapter sees.

    Creating it resolves the inputs (an item whose input is lost fails at once) and sends
    ``started``; ``finish`` or ``fail`` report every item of the batch, once."""

    def __init__(self, runner: BatchRunner, batch: Batch, moved: dict, announce: bool = True):
        self.runner, self.batch = runner, batch
        self.results: dict[str, ItemResult] = {}
        self.items: list[PreparedItem] = []
        self.moved_bytes: dict[str, int] = {}  # idempotency key -> bytes moved here for it
        for it in batch.items:
            try:
                values, moved_bytes = runner.resolve(it.inputs, moved)
                self.items.append(PreparedItem(it, values))
                self.moved_bytes[it.idempotency_key] = moved_bytes
            except KeyError as err:
                lost = (err.node_id,) if isinstance(err, LostInput) else None
                self.results[it.idempotency_key] = failed(
                    batch,
                    it,
                    runner.device_id,
                    f"input lost: {err}",
                    True,
                    "unavailable",
                    lost=lost,
                )
        # "started" goes out before any heartbeat can say busy: the host then always knows
        # which batches a busy worker runs (and times each against its deadline). A batch sent
        # to an idle worker is not announced: the host timed it from its send.
        if announce:
            runner.send((wire.STARTED, batch.batch_id))
        self.started = runner.perf_counter()
        self.ctx = _Ctx(runner, self.started)
        self.reported = False

    def finish(self, outputs: list) -> None:
        runner = self.runner
        if runner.torch_device.type == "cuda":
            import torch

            torch.cuda.synchronize(runner.torch_device)
        device_ms = (runner.perf_counter() - self.started) * 1000.0
        batch, results = self.batch, self.results
        pairs = list(zip(self.items, outputs, strict=True))
        for p, out in pairs:
            key = p.item.idempotency_key
            results[key] = runner.result(batch, p.item, out, device_ms, self.moved_bytes[key])
        self._report()
        # Kept after the report, which the host waits for; the main thread is still ours
        # until this returns, so no later message can miss an output.
        for p, out in pairs:
            if out.error is None:
                runner.outputs.keep(p.item.step.run_id, p.item.step.node_id, out.value)

    def fail(self, reason: str) -> None:
        """The batch raised inside the model: its items fail, retriable (the worker lives)."""
        if self.reported:
            return
        reason = printable(reason)
        log.warning("batch %s failed: %s", self.batch.batch_id, reason)
        for p in self.items:
            self.results[p.item.idempotency_key] = failed(
                self.batch, p.item, self.runner.device_id, reason, True, "model_error"
            )
        self._report()

    def _report(self) -> None:
        if not self.reported:
            self.reported = True
            results = [self.results[it.idempotency_key] for it in self.batch.items]
            self.runner.send((wire.RESULTS, self.batch.batch_id, results))


class BatchRunner:
    """Runs batches on the adapters of one worker and reports them (main thread only).

    ``adapters`` (replica id -> adapter) and ``outputs`` are the worker's, shared with its
    loading and export code; ``send`` puts a message on the way to the host; ``joinable(replica)``
    returns the batch messages for that replica now at the head of the inbox, taken out (see
    the module docstring). ``busy`` is True while a batch runs (heartbeats report it)."""

    def __init__(
        self,
        device: DeviceInfo,
        torch_device: Any,
        adapters: dict[str, Any],
        outputs: payloads.HeldOutputs,
        send: Callable[[tuple], None],
        joinable: Callable[[str], list[tuple]],
        clock: Clock,
    ) -> None:
        self.device_id, self.torch_device = device.device_id, torch_device
        self.adapters, self.outputs = adapters, outputs
        self.send, self.joinable = send, joinable
        self.perf_counter = clock.perf_counter
        self.busy = False

    def run(self, batch: Batch, moved: dict[tuple[str, str, str], Any], announce: bool = True):
        """Run ``batch`` (and, for a decode loop, the batches that join it). ``announce``:
        send ``started`` first (False when the host timed the batch from its send)."""
        adapter = self.adapters.get(batch.replica_id)
        if adapter is None:
            reason = f"replica {batch.replica_id} is not loaded on {self.device_id}"
            fails = [failed(batch, it, self.device_id, reason, True, "unavailable")
                     for it in batch.items]  # fmt: skip
            self.send((wire.RESULTS, batch.batch_id, fails))
            return
        first = _Running(self, batch, moved, announce)
        running = [first]
        self.busy = True
        try:
            continuous = getattr(adapter, "run_continuous", None)
            if not first.items:
                first.finish([])
            elif continuous is not None:
                continuous(first, lambda: self._joiners(batch.replica_id, running))
            else:
                first.finish(isolate(adapter, first.items, first.ctx, batch.batch_id))
        except Exception as err:  # a failed batch fails its items; the worker lives on
            log.exception("batch %s failed", batch.batch_id)
            for run in running:  # every batch of the loop not yet reported
                run.fail(f"{type(err).__name__}: {err}")
        finally:
            self.busy = False

    def _joiners(self, replica_id: str, running: list[_Running]) -> list[_Running]:
        """Batches for ``replica_id`` at the head of the inbox, taken out and started (a batch
        with no runnable item is reported at once)."""
        joined = []
        for msg in self.joinable(replica_id):
            run = _Running(self, *msg[1:])
            running.append(run)
            if run.items:
                joined.append(run)
            else:
                run.finish([])
        if joined:
            log.debug("%d batch(es) joined the loop of %s", len(joined), replica_id)
        return joined

    def resolve(self, inputs, moved) -> tuple[dict[str, Any], int]:  # noqa: ANN001
        """An item's inputs as values, and the bytes of those that moved here from another
        worker; raises KeyError naming an input no longer held."""
        resolved, moved_bytes = {}, 0
        for name, value in inputs.items():
            if isinstance(value, InputRef):
                key = (value.run_id, value.node_id, value.field)
                if key in moved:
                    value = payloads.unpack(moved[key])
                    moved_bytes += payloads.nbytes(value)
                else:
                    held = self.outputs.get(value.run_id, value.node_id)
                    if held is None or value.field not in held:
                        raise LostInput(value)
                    value = held[value.field]
            resolved[name] = value
        return resolved, moved_bytes

    def result(self, batch: Batch, item: BatchItem, out, device_ms: float,  # noqa: ANN001
               moved_bytes: int = 0) -> ItemResult:  # fmt: skip
        """The result of one item the adapter ran (built in one go: ``replace`` on a failure
        template cost a few us more per item, on the way back to the host)."""
        if out.error is not None:
            why = printable(out.error)  # it may quote the input
            return failed(batch, item, self.device_id, why, False, "bad_input", out.field)
        return ItemResult(
            step=item.step,
            idempotency_key=item.idempotency_key,
            replica_id=batch.replica_id,
            device_id=self.device_id,
            ok=True,
            input_tokens=out.input_tokens,
            output_tokens=out.output_tokens,
            device_ms=device_ms,
            first_token_ms=out.first_token_ms,
            prefix_hit_tokens=out.prefix_hit_tokens,
            label=out.label,
            item_count=out.item_count,
            batch_size=len(batch.items),
            output=payloads.to_plain(out.value) if item.return_output else None,
            moved_bytes=moved_bytes,
        )


def failed(
    batch: Batch, item: BatchItem, device_id: str, reason: str | None, retriable: bool, cause: str,
    field: str | None = None, lost: tuple[str, ...] | None = None,
) -> ItemResult:  # fmt: skip
    """The failed result of one item of ``batch`` on this worker (``field``: the input to blame,
    for a ``bad_input``)."""
    return ItemResult(
        step=item.step,
        idempotency_key=item.idempotency_key,
        replica_id=batch.replica_id,
        device_id=device_id,
        ok=False,
        error=reason,
        retriable=retriable,
        batch_size=len(batch.items),
        cause=cause,
        field=field,
        lost=lost,
    )
