"""LoRA adapters in the core: a deterministic mirror of each generate replica's adapter LRU,
the load time a replica lacking an adapter pays, and the per-batch adapter slot limit.

A request may name an adapter (``Request.adapter``) of one base model
(``Request.adapter_model``); it applies to the run's generate steps whose node names that
model. A replica holds at most ``ModelSpec.max_adapters`` adapters (the executor's
``LoraSlots``, :mod:`control.executor.adapters.lora`): ``adapter_lru.AdapterLru`` mirrors
it, updated when a batch is dispatched (the executor loads a batch's adapters when the batch starts), the
same way: each adapter of the batch used in batch order, then the least recently used adapters
outside the batch evicted down to the capacity. The mirror does not see the executor keep an
adapter still in use by a running continuous batch; it may then believe an adapter evicted that
is still held (routing then over-prices that replica by one load, never under-prices another).

Routing adds the adapter's load time to a candidate lacking it (as it adds a model's load time
to a loading replica), so a replica holding the adapter is preferred unless its queue is longer
than the load; the twin's executor waits out the load time the core charged a batch
(``Dispatch.adapter_load_us``), so a what-if with more adapters than slots shows the switches.
"""

from __future__ import annotations

from control.core.state import QueuedStep, ReplicaRecord


def step_adapter(step: QueuedStep) -> str:
    """The adapter ``step`` runs with: its request's, on a generate step of the adapter's base
    model; else ``""``."""
    req = step.run.request
    if req.adapter and step.node.task == "generate" and step.node.model == req.adapter_model:
        return req.adapter
    return ""


def adapter_load_us(step: QueuedStep, rec: ReplicaRecord) -> int:
    """What loading ``step``'s adapter costs on ``rec``: the adapter's measured load time
    (``Request.adapter_load_s``) when known, else the model's ``adapter_load_s``."""
    stated = step.run.request.adapter_load_s
    return int(stated * 1e6) if stated > 0 else rec.adapters.load_us


def within_slots(chosen: list[QueuedStep], rec: ReplicaRecord) -> list[QueuedStep]:
    """The longest prefix of ``chosen`` holding at most ``max_adapters`` distinct adapters
    (steps on the base always fit; the first step always goes)."""
    seen: set[str] = set()
    for i, step in enumerate(chosen):
        name = step_adapter(step)
        if name and name not in seen:
            if len(seen) >= rec.model.max_adapters and i > 0:
                return chosen[:i]
            seen.add(name)
    return chosen


def charge_switches(rec: ReplicaRecord, chosen: list[QueuedStep]) -> int:
    """Record the batch ``chosen`` on ``rec``'s adapter mirror; returns the load time (us) of
    the adapters it lacked, which the batch pays before it starts."""
    names = [step_adapter(s) for s in chosen]
    if not any(names):
        return 0
    loaded, _evicted = rec.adapters.use(names)
    first = {name: s for name, s in zip(names, chosen, strict=True) if name}
    return sum([adapter_load_us(first[name], rec) for name in loaded])
