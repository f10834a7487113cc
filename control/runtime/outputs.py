"""Turning a finished run's output references into values for its caller.

A workflow output is a tuple of core ``InputRef`` (several for a merged map output). Request
inputs and host-tool outputs are at hand; outputs a worker holds are fetched from it (tensors
arrive as lists). Usually a worker's output came back with its result, so every value is at
hand at once and the run settles in the same loop turn; only a real fetch is awaited. Started
once per successful run, before the executor releases the run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Mapping
from typing import Any

from control.core.types import InputRef
from control.executor.protocol import Executor
from control.executor.protocol import InputRef as ExecRef
from control.runtime import mapping

#: One output value: a fetch in progress and how to pick the value from what it returns, or
#: (None, the value itself).
_Part = tuple[concurrent.futures.Future | None, Any]


class OutputFetch:
    """The outputs of one finished run, every fetch started on construction (raises
    ``InputUnavailable`` when a request input or host output is gone, ``KeyError`` when an
    output at hand lacks the field asked for). ``ready`` says whether
    all are at hand; ``values()`` then returns them (raising ``KeyError`` or
    ``InputUnavailable`` for an output whose worker died after the step); ``wait()`` awaits
    the fetches still running first. Each fetch is sent once, whichever is used."""

    def __init__(
        self, outputs: Mapping[str, tuple[InputRef, ...]], stores: mapping.Stores, ex: Executor
    ) -> None:
        self._parts = {
            name: [_start(r, stores, ex) for r in refs] for name, refs in outputs.items()
        }

    @property
    def ready(self) -> bool:
        return all(f is None or f.done() for parts in self._parts.values() for f, _ in parts)

    def values(self) -> dict[str, Any]:
        """Output name -> value (a list in chunk order for merged outputs); needs ``ready``."""
        result: dict[str, Any] = {}
        for name, parts in self._parts.items():
            got = [pick if f is None else pick(f.result()) for f, pick in parts]
            result[name] = got[0] if len(got) == 1 else got
        return result

    async def wait(self) -> dict[str, Any]:
        """``values()`` once every fetch has come back."""
        for parts in self._parts.values():
            for f, _ in parts:
                if f is not None and not f.done():
                    await asyncio.wrap_future(f)
        return self.values()


def _start(ref: InputRef, stores: mapping.Stores, ex: Executor) -> _Part:
    v = mapping.resolve_ref(ref, stores)
    if isinstance(v, ExecRef):
        run_id, node_id, pick = v.run_id, v.node_id, _field(v.field, None)
    elif isinstance(v, mapping.Fetch):
        run_id, node_id, pick = v.run_id, v.exec_node, _field(v.field, v.select)
    else:
        return None, v
    # an output that came back with its result is taken as it is (an executor that can say
    # so): no future to build and resolve on the way of every run's answer
    returned = getattr(ex, "returned_output", None)
    held = returned(run_id, node_id) if returned is not None else None
    if held is not None:
        return None, pick(held)
    return ex.fetch_output(run_id, node_id), pick


def _field(name: str, select: int | None) -> Callable[[Mapping[str, Any]], Any]:
    if select is None:
        return lambda held: held[name]
    return lambda held: held[name][select]
