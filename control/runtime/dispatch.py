"""Carrying out a ``Dispatch``: the actuator's hand for steps (it decides nothing).

* A model step: an executor ``Batch`` on the same replica id, the step's inputs mapped
  (``mapping``); results come back through ``Completions``. Inputs held by another worker are
  fetched first, in a task, and the batch is submitted once they are here.
* ``router``/``segment`` run here, on the loop (``tools``), and settle at once.
* ``vector_search`` runs on the executor's index replica of ``params["index"]`` on the device
  holding the embedding (or any device serving that index).

An item that cannot reach the executor (no replica serves its index, an input that cannot be
resolved, a host tool refusing its input) fails at once: its result goes to the core like any
other, so the step fails or retries now instead of timing out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from control.clock import SYSTEM_CLOCK, Clock
from control.core.actions import Dispatch
from control.core.types import StepResult
from control.executor.protocol import Batch, Executor
from control.executor.protocol import BatchItem as ExecItem
from control.runtime import lora, mapping
from control.runtime.completions import Completions
from control.runtime.state import PendingBatch, Record, RunState, failed_item
from control.runtime.tools import HOST_TOOLS, ToolInputError
from control.runtime.types import KeptOutput, UsageRecord

#: The device a host tool's step is billed to (and a batch no replica could take).
HOST = "host"


class Dispatcher:
    """Turns ``Dispatch`` actions into executor batches or host-tool results.

    ``stores`` resolves inputs (its ``host_outputs`` receive the host tools' outputs);
    ``index_replicas`` maps index name -> device id -> replica id (filled by the runtime as
    index replicas load); ``put`` queues records for the driver; ``spawn`` runs a task the
    runtime cancels at stop. Time (a host tool's measured duration, a failure's instant) is
    read from ``clock``."""

    def __init__(
        self,
        executor: Executor,
        completions: Completions,
        runs: dict[str, RunState],
        stores: mapping.Stores,
        index_replicas: dict[str, dict[str, str]],
        put: Callable[[Record], None],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        *,
        stream_tokens: bool = True,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.ex = executor
        self.done = completions
        self.runs = runs
        self.stores = stores
        self.index_replicas = index_replicas
        self.put = put
        self.spawn = spawn
        self.stream_tokens = stream_tokens
        self.clock = clock

    def dispatch(self, d: Dispatch, now: float) -> None:
        if d.replica_id is None and d.tool in HOST_TOOLS:
            return self._host_tool(d, now)
        replica, device = d.replica_id, d.device_ids[0] if d.device_ids else "?"
        if d.replica_id is None:
            replica, device = self._index_replica(d)
        pb = PendingBatch(d, {i.idempotency_key: i for i in d.items}, now, device, replica)
        self.done.expect(pb)
        if replica is None:  # no index replica serves it: every item fails now
            for item in d.items:
                self._fail_item(
                    pb, item, f"no {d.tool} replica serves {item.params.get('index')!r}"
                )
            return None
        kind = d.tool or d.items[0].task
        ready: list[ExecItem] = []
        fetching: list[ExecItem] = []
        for item in d.items:
            try:
                inputs = mapping.resolve_inputs(item, kind, self.stores)
            except (mapping.InputUnavailable, IndexError, TypeError) as err:
                self._fail_item(pb, item, f"input unavailable: {err}")
                continue
            run = self.runs.get(item.request_id)
            sampling = run.sampling if run is not None else None
            params = mapping.gen_params(item, kind, self.stream_tokens, sampling)
            target = fetching if mapping.pending_fetches(inputs) else ready
            back = run is not None and (run.durable or item.node_id in run.output_nodes)
            lora_ref = lora.adapter_ref(sampling, item.adapter)
            target.append(mapping.exec_item(item, inputs, params, return_output=back,
                                            adapter=lora_ref))  # fmt: skip
        expected_ms = d.predicted_us / 1000.0 if d.predicted_us > 0 else None
        if ready:
            self.ex.submit(Batch(d.batch_id, replica, tuple(ready), expected_ms))
        if fetching:
            self.spawn(self._fetch_then_submit(d.batch_id, replica, fetching, expected_ms))

    def _index_replica(self, d: Dispatch) -> tuple[str | None, str]:
        index = str(d.items[0].params.get("index", ""))
        by_device = self.index_replicas.get(index, {})
        near = [r.device_id for b in d.items[0].inputs for r in b.refs if r.device_id]
        for dev in (*near, *sorted(by_device)):
            if dev in by_device:
                return by_device[dev], dev
        return None, HOST

    def _fail_item(
        self,
        pb: PendingBatch,
        item,  # noqa: ANN001
        error: str,
        result: StepResult | None = None,
    ) -> None:
        """Fail one item of a dispatched batch before it reaches the executor (no replica, an
        input that cannot be resolved, a host tool refusing its input): its result goes to the
        core like any other, so the step fails or retries now instead of timing out."""
        result = result or failed_item(item, error)
        for rec in self.done.settle(pb.dispatch.batch_id, item.idempotency_key,
                                    result, self.clock.monotonic()):  # fmt: skip
            self.put(rec)

    async def _fetch_then_submit(
        self, batch_id: str, replica: str, items: list[ExecItem], expected_ms: float | None
    ) -> None:
        fetches = {f for it in items for f in mapping.pending_fetches(it.inputs)}
        fetched = {}
        for f in fetches:
            out = await asyncio.wrap_future(self.ex.fetch_output(f.run_id, f.exec_node))
            fetched[f] = out[f.field] if f.select is None else out[f.field][f.select]
        ready = [replace(it, inputs=mapping.substitute(it.inputs, fetched)) for it in items]
        self.ex.submit(Batch(batch_id, replica, tuple(ready), expected_ms))

    def _host_tool(self, d: Dispatch, now: float) -> None:
        pb = PendingBatch(d, {i.idempotency_key: i for i in d.items}, now, HOST, None)
        self.done.expect(pb)
        tool = HOST_TOOLS[d.tool or ""]
        for item in d.items:
            started = self.clock.perf_counter()
            try:
                inputs = mapping.resolve_inputs(item, tool.name, self.stores)
                out = tool.run(inputs, item.params)
            except ToolInputError as err:  # about the input: final bad_input, never retried
                bad = StepResult(key=item.key, ok=False, error=f"{tool.name}: {err}",
                                 fault="bad_input", field=err.field)  # fmt: skip
                self._fail_item(pb, item, str(err), bad)
                continue
            except mapping.InputUnavailable as err:  # a lost upstream output: retryable
                self._fail_item(pb, item, str(err))
                continue
            device_ms = (self.clock.perf_counter() - started) * 1000.0
            node = mapping.exec_node(item.node_id, item.chunk)
            self.stores.host_outputs[(item.request_id, node)] = out.value
            pb.device_ms = max(pb.device_ms, device_ms)
            self._bill_tool(item, tool.name, out.input_tokens, device_ms, now,
                            out.label, out.item_count)  # fmt: skip
            result = StepResult(
                key=item.key, ok=True, input_tokens=out.input_tokens,
                route_label=out.label, item_count=out.item_count,
            )  # fmt: skip
            for rec in self.done.settle(d.batch_id, item.idempotency_key, result, now):
                self.put(rec)

    def _bill_tool(self, item, tool: str, tokens: int, device_ms: float, now: float,  # noqa: ANN001
                   label: str | None = None, count: int | None = None) -> None:  # fmt: skip
        if not self.done.first_bill(item.idempotency_key, item.request_id, now):
            return
        run = self.runs.get(item.request_id)
        if run is None:
            return
        kept = None
        if run.durable:
            out = self.stores.host_outputs[
                (item.request_id, mapping.exec_node(item.node_id, item.chunk))
            ]
            kept = KeptOutput(item.node_id, item.chunk, label, count, out)  # fmt: skip
        rec = UsageRecord(
            item.request_id, run.request.tenant_id, run.request.workflow, item.node_id,
            item.idempotency_key, item.attempt, tool, HOST, None, tokens, 0,
            int(device_ms * 1000), self.done.cost.cost_units(tool, tokens, 0), 1, kept,
        )  # fmt: skip
        self.done.record_usage(run, rec)
