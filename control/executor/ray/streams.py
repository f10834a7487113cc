"""Streamed text on the Ray executor: the deltas of a batch reach the executor while it runs.

A batch with an item that asks for streamed text (``GenParams.stream``) is called through the
actor's generator method :meth:`~control.executor.ray.actor.DeviceActor.stream` as a Ray
streaming generator (``num_returns="streaming"``: each value it yields reaches the caller as it
is yielded). It yields ``(messages, False)`` for the text produced so far, then once
``(messages, True)``: the last messages (results among them), what the plain ``run`` returns. Every other batch keeps the plain call, one round trip and no
thread (the hot path: a streamed call costs about twice as much).

Consuming the stream blocks (the next value may be seconds away), so each streamed batch has a
small daemon thread of its own that forwards what arrives to the pump thread in order:
``on_deltas(messages)`` for each chunk of text, then ``on_end(future)`` once, with a future
that holds the final value or what the call raised (an actor that died fails the stream with
its ``RayActorError``, as a plain call's reference would). The pump runs both under the
executor's lock, as it runs a plain call's handler.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

import ray

from control.executor.protocol import Batch
from control.executor.ray.pump import Pump


def wanted(batch: Batch) -> bool:
    """Whether ``batch`` goes the streamed way (an item of it asked for streamed text)."""
    return any(item.params.stream for item in batch.items)


def call(actor: Any, batch: Batch, keys: tuple, refs: list, pump: Pump,
         on_deltas: Callable[[list[tuple]], None],
         on_end: Callable[[concurrent.futures.Future], None]) -> None:  # fmt: skip
    """Call ``actor.stream`` for ``batch`` and forward what it yields (module docstring)."""
    stream = actor.stream.options(num_returns="streaming").remote(batch, keys, *refs)
    threading.Thread(target=_forward, args=(stream, pump, on_deltas, on_end), daemon=True,
                     name=f"ray-stream-{batch.batch_id}").start()  # fmt: skip


def _forward(stream: Any, pump: Pump, on_deltas: Callable[[list[tuple]], None],
             on_end: Callable[[concurrent.futures.Future], None]) -> None:  # fmt: skip
    end: concurrent.futures.Future = concurrent.futures.Future()
    try:
        for ref in stream:
            messages, last = ray.get(ref)
            if not last:
                pump.call(lambda _, m=messages: on_deltas(m))
            else:
                end.set_result(messages)
                break
        else:
            raise RuntimeError("the stream ended without the batch's results")
    except Exception as err:  # noqa: BLE001 (the actor died, or the call failed: on_end says)
        if not end.done():
            end.set_exception(err)
    pump.call(lambda _: on_end(end))
