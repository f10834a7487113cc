"""Moving outputs between workers, and fetching them: the requests the host has out to workers.

A batch whose inputs include outputs held by another worker is *parked* here while each such
field is exported by its holder (a named shared-memory block for a tensor, see
:mod:`control.executor.worker.payloads`); once every export has answered, the batch is ready and
goes to its own worker with the moved values. An export that fails (the output is gone, or its
holder died) leaves that input out: the consumer worker then reports the item ``input lost``.
A fetch asks the holder for a plain copy of a whole output, for the caller.

Not thread-safe: the executor calls it under its lock. Messages go out through ``send(device
id, message)``, which never blocks.
"""

from __future__ import annotations

import concurrent.futures
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from control.executor.futures import fail, settle
from control.executor.host.outputs import OutputDirectory
from control.executor.protocol import Batch, InputRef, wire

#: (run id, node id, field) of an input moved from another worker
FieldKey = tuple[str, str, str]


@dataclass
class ParkedBatch:
    """A batch for ``device_id``, waiting for the exports named in ``waiting``; ``moved``
    holds the packed values that arrived (None for one still on its way, or lost)."""

    device_id: str
    batch: Batch
    waiting: set[str]
    moved: dict[FieldKey, object] = field(default_factory=dict)

    def values(self) -> dict[FieldKey, object]:
        """The moved values to send with the batch."""
        return {k: v for k, v in self.moved.items() if v is not None}


class Transfers:
    def __init__(self, outputs: OutputDirectory, send: Callable[[str, tuple], bool]) -> None:
        self._outputs = outputs
        self._send = send
        self._ids = itertools.count()
        self._parked: dict[str, ParkedBatch] = {}  # batch id -> parked batch
        #: request id -> (holder device, a fetch's future or an export's (batch id, field))
        self._requests: dict[str, tuple[str, concurrent.futures.Future | tuple]] = {}

    # ---- moving inputs

    def route(self, batch: Batch, device_id: str) -> ParkedBatch | None:
        """Ask the holders of ``batch``'s inputs held elsewhere to export them. Returns the
        batch ready to deliver when it needs none, else None (it is parked here)."""
        parked = ParkedBatch(device_id, batch, set())
        for item in batch.items:
            for ref in item.inputs.values():
                if not isinstance(ref, InputRef):
                    continue
                holder = self._outputs.holder(ref.run_id, ref.node_id)
                if holder is None or holder == device_id:
                    continue  # held locally, or lost: the worker reports "input lost"
                request_id = f"exp-{next(self._ids)}"
                key = (ref.run_id, ref.node_id, ref.field)
                self._requests[request_id] = (holder, (batch.batch_id, key))
                parked.waiting.add(request_id)
                self._send(holder, (wire.EXPORT, request_id, ref.run_id, ref.node_id, ref.field))
                parked.moved.setdefault(key, None)
        if not parked.waiting:
            return parked
        self._parked[batch.batch_id] = parked
        return None

    def on_exported(self, request_id: str, payload: object) -> ParkedBatch | None:
        """An export answered (``payload`` None: it failed). Returns the batch it completes,
        taken out of the parked ones, or None."""
        _, target = self._requests.pop(request_id, (None, (None, None)))
        batch_id, key = target  # type: ignore[misc]
        parked = self._parked.get(batch_id)
        if parked is None:
            return None  # cancelled or lost meanwhile
        parked.waiting.discard(request_id)
        if payload is not None:
            parked.moved[key] = payload
        if parked.waiting:
            return None
        del self._parked[batch_id]
        return parked

    def is_parked(self, batch_id: str) -> bool:
        return batch_id in self._parked

    def cancel(self, batch_id: str, key: str) -> tuple[str, Batch, Batch | None]:
        """Take the item ``key`` out of a parked batch: (its device, the item as a batch of
        one, the parked batch when nothing of it is left (dropped; exports still on their way
        are then ignored), else None)."""
        parked = self._parked[batch_id]
        gone = tuple(i for i in parked.batch.items if i.idempotency_key == key)
        stay = tuple(i for i in parked.batch.items if i.idempotency_key != key)
        taken = replace(parked.batch, items=gone)
        if stay:
            parked.batch = replace(parked.batch, items=stay)
            return parked.device_id, taken, None
        del self._parked[batch_id]
        return parked.device_id, taken, parked.batch

    def drop_parked_for(self, device_id: str) -> list[Batch]:
        """The device's worker is gone: its parked batches, taken out."""
        gone = [b for b, p in self._parked.items() if p.device_id == device_id]
        return [self._parked.pop(b).batch for b in gone]

    # ---- fetching outputs

    def fetch(self, holder: str, run_id: str, node_id: str) -> concurrent.futures.Future:
        """Ask ``holder`` for a plain copy of an output; the future resolves with it."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        request_id = f"fetch-{next(self._ids)}"
        self._requests[request_id] = (holder, future)
        self._send(holder, (wire.FETCH, request_id, run_id, node_id))
        return future

    def on_fetched(self, request_id: str, value: object, error: str | None) -> None:
        _, future = self._requests.pop(request_id, (None, None))
        if isinstance(future, concurrent.futures.Future):
            if error:
                fail(future, KeyError(error))
            else:
                settle(future, value)

    def forget_holder(self, device_id: str) -> list[ParkedBatch]:
        """The device's worker is gone: its fetches fail with KeyError, its exports count as
        failed. Returns the parked batches that thereby became ready, in request order."""
        ready = []
        for request_id, (holder, target) in list(self._requests.items()):
            if holder != device_id:
                continue
            if isinstance(target, concurrent.futures.Future):
                del self._requests[request_id]
                fail(target, KeyError(f"worker {device_id} down"))
            elif (parked := self.on_exported(request_id, None)) is not None:
                ready.append(parked)
        return ready
