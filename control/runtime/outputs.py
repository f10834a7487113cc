"""Turning a finished run's output references into values for its caller.

A workflow output is a tuple of core ``InputRef`` (several for a merged map output). Request
inputs and host-tool outputs are at hand; outputs a worker holds are fetched from it (tensors
arrive as lists). Called once per successful run, before the executor releases the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from control.core.types import InputRef
from control.executor.base import Executor
from control.executor.base import InputRef as ExecRef
from control.runtime import mapping


async def _fetch(ex: Executor, run_id: str, node_id: str) -> Any:
    future = ex.fetch_output(run_id, node_id)
    if future.done():  # the output came back with its result: no wait, no extra loop turn
        return future.result()
    return await asyncio.wrap_future(future)


async def _value(ref: InputRef, stores: mapping.Stores, ex: Executor) -> Any:
    v = mapping.resolve_ref(ref, stores)
    if isinstance(v, ExecRef):
        held = await _fetch(ex, v.run_id, v.node_id)
        return held[v.field]
    if isinstance(v, mapping.Fetch):
        held = await _fetch(ex, v.run_id, v.exec_node)
        return held[v.field] if v.select is None else held[v.field][v.select]
    return v


async def collect_outputs(
    outputs: Mapping[str, tuple[InputRef, ...]], stores: mapping.Stores, ex: Executor
) -> dict[str, Any]:
    """Output name -> value (a list in chunk order for merged outputs). Raises KeyError or
    ``InputUnavailable`` when an output is gone (its worker died after the step)."""
    result: dict[str, Any] = {}
    for name, refs in outputs.items():
        values = [await _value(r, stores, ex) for r in refs]
        result[name] = values[0] if len(values) == 1 else values
    return result
