"""Running batches inside a worker process (the main thread's hot path).

``on_batch`` resolves each item's inputs (literals, outputs this worker holds, or values moved
here from another worker), tells the executor the batch has ``started`` (its hang deadline
starts then), runs the replica's adapter once for the whole batch, keeps each successful
output for later steps, and reports one :class:`ItemResult` per item with a structured cause
for failures. Kept apart from ``worker.py`` only to keep modules small.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from control.executor import transfer
from control.executor.base import Batch, InputRef, ItemResult
from control.runtime import clock

log = logging.getLogger(__name__)


class _Ctx:
    """RunContext handed to adapters during one batch."""

    def __init__(self, worker: Any, started: float) -> None:
        self.worker, self.started = worker, started

    def tick(self) -> None:
        pass  # heartbeats come from their own thread; a tick is only a safe point

    def emit_delta(self, item, index: int, text: str) -> None:
        self.worker.send(("delta", item.idempotency_key, item.step, index, text))

    def elapsed_ms(self) -> float:
        return (clock.perf_counter() - self.started) * 1000.0


class BatchMixin:
    """Batch execution of :class:`~control.executor.worker.Worker` (uses its ``adapters``,
    ``outputs``, ``send``, ``device``, ``config`` and ``torch_device``)."""

    # ---- batches ------------------------------------------------------------------------------

    def on_batch(self, batch: Batch, moved: dict[tuple[str, str, str], Any]) -> None:
        adapter = self.adapters.get(batch.replica_id)
        if adapter is None:
            reason = f"replica {batch.replica_id} is not loaded on {self.device.device_id}"
            fails = [self._fail(batch, it, reason, True, "unavailable") for it in batch.items]
            self._report(batch, fails)
            return
        from control.executor.adapters.base import PreparedItem

        prepared, results = [], {}
        for it in batch.items:
            try:
                prepared.append(PreparedItem(it, self._resolve(it.inputs, moved)))
            except KeyError as err:
                results[it.idempotency_key] = self._fail(
                    batch, it, f"input lost: {err}", True, "unavailable"
                )
        # "started" goes out before any heartbeat can say busy: the executor then always
        # knows which batch a busy worker runs (and times it against its deadline)
        self.send(("started", batch.batch_id))
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
                results[p.item.idempotency_key] = self._fail(
                    batch, p.item, reason, True, "model_error"
                )
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
        base = self._fail(batch, item, out.error, False, "bad_input")
        if out.error is not None:
            return base
        self.outputs[(item.step.run_id, item.step.node_id)] = out.value
        while len(self.outputs) > self.config.max_held_outputs:
            self.outputs.popitem(last=False)
        return replace(
            base,
            ok=True,
            cause=None,
            input_tokens=out.input_tokens,
            output_tokens=out.output_tokens,
            device_ms=device_ms,
            first_token_ms=out.first_token_ms,
            prefix_hit_tokens=out.prefix_hit_tokens,
            label=out.label,
            item_count=out.item_count,
            output=transfer.to_plain(out.value) if item.return_output else None,
        )

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
