"""What a model adapter is: the worker hands it prepared items and gets one output per item.

An adapter lives inside one worker process, on one device. ``run`` is called by the worker's
main thread with a batch whose input references are already resolved to values; it may call
``ctx.tick()`` during long work (so heartbeats keep flowing) and ``ctx.emit_delta`` to stream
text. It returns one :class:`ItemOutput` per item, in order. A bad input of one item is that
item's ``error`` (the others still run): adapters read inputs through :func:`require` and
:func:`require_texts`, which refuse a missing input, a wrong type and text that cannot be
encoded (a lone surrogate, which makes a tokenizer raise) with an :class:`InputError` naming the
input. Any other exception fails the batch; the worker then isolates the item to blame (see
:mod:`control.executor.worker.batches`).

An adapter that batches continuously (generate) also has ``run_continuous``: the worker hands
it a first batch as a :class:`BatchGroup` and a ``joins`` callable it calls at every decode step
boundary to take further batches of the same replica into the running loop. Each group is
reported by the adapter (``finish``) as soon as its own items are done, or failed (``fail``)
when it could not join; the worker fails whatever is left unreported if ``run_continuous``
raises.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from control.executor.protocol import BatchItem


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
    field: str | None = None  # with ``error``: the input to blame (``text``, ``texts[2]``)


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


class BatchGroup(Protocol):
    """One dispatched batch inside a continuous run; the worker implements it."""

    items: Sequence[PreparedItem]  # its items, inputs resolved, in batch order
    ctx: RunContext  # its own: ``elapsed_ms`` counts from when THIS batch started (joined)

    def finish(self, outputs: list[ItemOutput]) -> None:
        """Its items are all done: report one output per item, in order (called once)."""

    def fail(self, reason: str) -> None:
        """It could not join (its own prefill raised): fail its items, retriable (once)."""


class ContinuousAdapter(Adapter, Protocol):
    def run_continuous(self, first: BatchGroup, joins: Callable[[], Sequence[BatchGroup]]) -> None:
        """Run ``first`` and every group ``joins()`` hands over while rows are still decoding;
        return when all of them are reported. ``joins`` must return quickly (it only looks at
        what is waiting); an empty answer means nothing joins at this step."""


def require(prepared: PreparedItem, name: str, kind: type | tuple[type, ...]) -> Any:
    """The input ``name`` of an item, checked; raises InputError naming it when absent, of the
    wrong type, or a text that cannot be encoded."""
    if name not in prepared.inputs:
        raise InputError(f"input {name!r} is missing (have {sorted(prepared.inputs)})", name)
    value = prepared.inputs[name]
    if not isinstance(value, kind):
        raise InputError(
            f"input {name!r} has type {type(value).__name__}, expected {_kind_name(kind)}", name
        )
    if isinstance(value, str):
        check_text(value, name)
    return value


def require_texts(prepared: PreparedItem, name: str) -> list[str]:
    """The input ``name`` as a list of texts (other scalars are turned into text, as before);
    raises InputError naming the input, or the element (``documents[3]``), that is unusable."""
    values = require(prepared, name, list)
    texts = []
    for i, v in enumerate(values):
        where = f"{name}[{i}]"
        if isinstance(v, dict | list | tuple | set | bytes):
            raise InputError(f"input {where!r} has type {type(v).__name__}, expected text", where)
        text = v if isinstance(v, str) else str(v)
        check_text(text, where)
        texts.append(text)
    return texts


def check_text(text: str, where: str) -> None:
    """Raise InputError when ``text`` cannot be encoded as UTF-8 (a lone surrogate, which
    JSON's ``\\ud800`` escapes can carry): the tokenizers raise on it. ASCII text, the usual
    case, is checked by one C scan."""
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        bad = ascii(text[err.start : err.end])  # the message must stay encodable itself
        raise InputError(
            f"input {where!r} is not valid Unicode text: {bad} at character {err.start} "
            f"(a lone surrogate) cannot be encoded",
            where,
        ) from None


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


class InputError(ValueError):
    """One item's inputs are unusable; reported as that item's (non-retriable) ``bad_input``
    error. ``field`` names the input to blame (``text``, ``documents[3]``) when one is."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def module_mib(module: Any) -> int:
    """The tensors a torch module holds, in MiB rounded up: its state (parameters, buffers and
    the packed weights of quantized layers, which ``parameters()`` does not list; see
    :func:`control.executor.precision.state_mib`)."""
    from control.executor.precision import state_mib

    return state_mib(module)
