"""What a model adapter is: the worker hands it prepared items and gets one output per item.

An adapter lives inside one worker process, on one device. ``run`` is called by the worker's
main thread with a batch whose input references are already resolved to values; it may call
``ctx.tick()`` during long work (so heartbeats keep flowing) and ``ctx.emit_delta`` to stream
text. It returns one :class:`ItemOutput` per item, in order. A bad input of one item is that
item's ``error`` (the others still run); an exception fails the whole batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from control.executor.base import BatchItem


@dataclass
class PreparedItem:
    item: BatchItem
    inputs: dict[str, Any]  # literal values, references already resolved


@dataclass
class ItemOutput:
    value: dict[str, Any] = field(default_factory=dict)  # the full output, kept in the worker
    input_tokens: int = 0
    output_tokens: int = 0
    first_token_ms: float | None = None
    prefix_hit_tokens: int = 0
    label: str | None = None
    item_count: int = 0
    error: str | None = None


class RunContext(Protocol):
    def tick(self) -> None:
        """Let the worker send a heartbeat if one is due (call between decode steps)."""

    def emit_delta(self, item: BatchItem, index: int, text: str) -> None:
        """Stream a piece of an item's generated text to the driver."""

    def elapsed_ms(self) -> float:
        """Milliseconds since the batch started."""


class Adapter(Protocol):
    task: str

    def run(self, items: Sequence[PreparedItem], ctx: RunContext) -> list[ItemOutput]: ...

    def memory_mib(self) -> int: ...


def require(prepared: PreparedItem, name: str, kind: type | tuple[type, ...]) -> Any:
    """The input ``name`` of an item, checked; raises InputError naming it when absent or wrong."""
    if name not in prepared.inputs:
        raise InputError(f"input {name!r} is missing (have {sorted(prepared.inputs)})")
    value = prepared.inputs[name]
    if not isinstance(value, kind):
        raise InputError(f"input {name!r} has type {type(value).__name__}, expected {kind}")
    return value


class InputError(ValueError):
    """One item's inputs are unusable; reported as that item's (non-retriable) error."""


def module_mib(module: Any) -> int:
    """Parameters and buffers of a torch module, in MiB rounded up."""
    total = sum(t.numel() * t.element_size() for t in module.parameters())
    total += sum(t.numel() * t.element_size() for t in module.buffers())
    return -(-total // (1024 * 1024))
