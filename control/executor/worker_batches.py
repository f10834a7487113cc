"""Running batches inside a worker process (the main thread's hot path).

``on_batch`` resolves each item's inputs (literals, outputs this worker holds, or values moved
here from another worker), tells the executor the batch has ``started`` (its hang deadline
starts then; not for a batch the executor sent to an idle worker and timed itself), runs the replica's adapter once for the whole batch, keeps each successful
output for later steps, and reports one :class:`ItemResult` per item with a structured cause
for failures.

Continuous batching. An adapter with ``run_continuous`` (generate) runs a decode loop that other
batches of the SAME replica join at step boundaries. It takes them from the inbox with
:meth:`~control.executor.inbox.Inbox.take_if`, only while the OLDEST waiting message is such a
batch. That is the fairness rule: messages still run in arrival order, so a batch for another
replica, a load, unload, export or stop that arrives ends joining (everything after it waits
behind it anyway); the loop then finishes the rows it has and the worker moves on. How many
rows join is the core's business (it keeps a replica's batches within its ``max_batch_size``);
the worker takes what is waiting, so it never waits on itself. Each batch is its own
:class:`_Running`: ``started`` when it joins, reported (with its own ``device_ms`` and first
token time, measured from its join) as soon as its items are done. Kept apart from ``worker.py``
only to keep modules small.
"""

from __future__ import annotations

import logging
from typing import Any

from control import clock
from control.executor import transfer
from control.executor.base import Batch, InputRef, ItemResult

log = logging.getLogger(__name__)


class _Ctx:
    """RunContext of one batch: its clock starts when the batch started (or joined)."""

    def __init__(self, worker: Any, started: float) -> None:
        self.worker, self.started = worker, started

    def tick(self) -> None:
        pass  # heartbeats come from their own thread; a tick is only a safe point

    def emit_delta(self, item, index: int, text: str) -> None:
        self.worker.send(("delta", item.idempotency_key, item.step, index, text))

    def elapsed_ms(self) -> float:
        return (clock.perf_counter() - self.started) * 1000.0


class _Running:
    """One batch from ``started`` to its report: the BatchGroup an adapter sees.

    Creating it resolves the inputs (an item whose input is lost fails at once) and sends
    ``started``; ``finish`` or ``fail`` report every item of the batch, once."""

    def __init__(self, worker: Any, batch: Batch, moved: dict, announce: bool = True) -> None:
        from control.executor.adapters.base import PreparedItem

        self.worker, self.batch = worker, batch
        self.results: dict[str, ItemResult] = {}
        self.items: list = []
        for it in batch.items:
            try:
                self.items.append(PreparedItem(it, worker._resolve(it.inputs, moved)))
            except KeyError as err:
                self.results[it.idempotency_key] = worker._fail(
                    batch, it, f"input lost: {err}", True, "unavailable"
                )
        # "started" goes out before any heartbeat can say busy: the executor then always
        # knows which batches a busy worker runs (and times each against its deadline). A
        # batch sent to an idle worker is not announced: the executor timed it from its send.
        if announce:
            worker.send(("started", batch.batch_id))
        self.started = clock.perf_counter()
        self.ctx = _Ctx(worker, self.started)
        self.reported = False

    def finish(self, outputs: list) -> None:
        if self.worker.torch_device.type == "cuda":
            import torch

            torch.cuda.synchronize(self.worker.torch_device)
        device_ms = (clock.perf_counter() - self.started) * 1000.0
        worker, batch, results = self.worker, self.batch, self.results
        pairs = list(zip(self.items, outputs, strict=True))
        for p, out in pairs:
            results[p.item.idempotency_key] = worker._result(batch, p.item, out, device_ms)
        self._report()
        # Kept after the report, which the executor waits for; the main thread is still ours
        # until this returns, so no later message can miss an output.
        for p, out in pairs:
            if out.error is None:
                worker._keep(p.item, out.value)

    def fail(self, reason: str) -> None:
        """The batch raised inside the model: its items fail, retriable (the worker lives)."""
        if self.reported:
            return
        log.warning("batch %s failed: %s", self.batch.batch_id, reason)
        for p in self.items:
            self.results[p.item.idempotency_key] = self.worker._fail(
                self.batch, p.item, reason, True, "model_error"
            )
        self._report()

    def _report(self) -> None:
        if not self.reported:
            self.reported = True
            results = [self.results[it.idempotency_key] for it in self.batch.items]
            self.worker._report(self.batch, results)


class BatchMixin:
    """Batch execution of :class:`~control.executor.worker.Worker` (uses its ``adapters``,
    ``outputs``, ``inbox``, ``send``, ``device``, ``config`` and ``torch_device``)."""

    # ---- batches ------------------------------------------------------------------------------

    def on_batch(
        self, batch: Batch, moved: dict[tuple[str, str, str], Any], announce: bool = True
    ) -> None:
        """Run ``batch`` (and, for a decode loop, the batches that join it). ``announce``:
        send ``started`` first (False when the executor timed the batch from its send)."""
        adapter = self.adapters.get(batch.replica_id)
        if adapter is None:
            reason = f"replica {batch.replica_id} is not loaded on {self.device.device_id}"
            fails = [self._fail(batch, it, reason, True, "unavailable") for it in batch.items]
            self._report(batch, fails)
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
                first.finish(adapter.run(first.items, first.ctx))
        except Exception as err:  # a failed batch fails its items; the worker lives on
            log.exception("batch %s failed", batch.batch_id)
            for run in running:  # every batch of the loop not yet reported
                run.fail(f"{type(err).__name__}: {err}")
        finally:
            self.busy = False

    def _joiners(self, replica_id: str, running: list[_Running]) -> list[_Running]:
        """Batches for ``replica_id`` at the head of the inbox, taken out and started (a batch
        with no runnable item is reported at once); see the module docstring for the rule."""
        joined = []
        with self.reading:  # batches that reached the pipe since the last step
            self.take_waiting()
        while (msg := self.inbox.take_if(lambda m: _joins(m, replica_id))) is not None:
            run = _Running(self, *msg[1:])
            running.append(run)
            if run.items:
                joined.append(run)
            else:
                run.finish([])
        if joined:
            log.debug("%d batch(es) joined the loop of %s", len(joined), replica_id)
        return joined

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
        """The result of one item the adapter ran (built in one go: ``replace`` on a failure
        template cost a few us more per item, on the way back to the executor)."""
        if out.error is not None:
            return self._fail(batch, item, out.error, False, "bad_input")
        return ItemResult(
            step=item.step,
            idempotency_key=item.idempotency_key,
            replica_id=batch.replica_id,
            device_id=self.device.device_id,
            ok=True,
            input_tokens=out.input_tokens,
            output_tokens=out.output_tokens,
            device_ms=device_ms,
            first_token_ms=out.first_token_ms,
            prefix_hit_tokens=out.prefix_hit_tokens,
            label=out.label,
            item_count=out.item_count,
            batch_size=len(batch.items),
            output=transfer.to_plain(out.value) if item.return_output else None,
        )

    def _keep(self, item, value: dict) -> None:
        """Hold an item's output for later steps (the oldest go beyond the bound)."""
        self.outputs[(item.step.run_id, item.step.node_id)] = value
        while len(self.outputs) > self.config.max_held_outputs:
            self.outputs.popitem(last=False)

    def _fail(
        self, batch: Batch, item, reason: str | None, retriable: bool, cause: str
    ) -> ItemResult:
        return ItemResult(
            step=item.step,
            idempotency_key=item.idempotency_key,
            replica_id=batch.replica_id,
            device_id=self.device.device_id,
            ok=False,
            error=reason,
            retriable=retriable,
            batch_size=len(batch.items),
            cause=cause,
        )

    def _report(self, batch: Batch, results: list[ItemResult]) -> None:
        self.send(("results", batch.batch_id, results))


def _joins(msg: tuple, replica_id: str) -> bool:
    return msg[0] == "batch" and msg[1].replica_id == replica_id
