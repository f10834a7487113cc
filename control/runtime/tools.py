"""Host tools: the cheap, model-free tool steps the core dispatches "on the host".

The core dispatches a tool step with no replica (``Dispatch.tool`` set). ``router`` and
``segment`` are pure functions of their inputs and run right in the driver's process (a pipe
round trip to a worker would cost more than the work). ``vector_search`` needs an embedding
index, so it runs on an executor index replica instead (see ``actuator``); it is not here.

A tool is a class with ``name`` and ``run(inputs, params) -> ToolOutput``; it raises
:class:`ToolInputError` naming the bad input. Registering a tool is one entry in ``HOST_TOOLS``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from control.executor.router_rules import parse_router_rules, route_label


class ToolInputError(ValueError):
    """A tool step's input is missing or has the wrong type (the step fails, not the loop).

    It is about the input, never the host: the dispatcher fails the item as ``bad_input``
    (final, not retried, never toward a breaker), blaming ``field`` (the tool's input port, or
    ``None`` when the step's own params are at fault)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ToolOutput:
    value: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None
    item_count: int | None = None
    input_tokens: int = 0


class HostTool(Protocol):
    name: str

    def run(self, inputs: Mapping[str, Any], params: Mapping[str, Any]) -> ToolOutput: ...


def _need(inputs: Mapping[str, Any], name: str) -> Any:
    if name not in inputs:
        raise ToolInputError(f"input {name!r} is missing (have {sorted(inputs)})", name)
    return inputs[name]


class RouterTool:
    """First rule with a keyword in the (lower-cased) value wins, else ``params["default"]``.
    Passes ``value`` through so the chosen branch reads it."""

    name = "router"

    def run(self, inputs: Mapping[str, Any], params: Mapping[str, Any]) -> ToolOutput:
        value = _need(inputs, "value")
        text = value if isinstance(value, str) else str(value)
        rules = parse_router_rules(params.get("rules") or ())
        label = route_label(text, rules, str(params.get("default", "default")))
        return ToolOutput({"label": label, "value": value}, label=label, item_count=1)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class SegmentTool:
    """Splits ``text`` into segments of whole sentences, at most ``params["max_chars"]``
    characters each (default 400; a longer sentence is a segment of its own). ``item_count``
    tells the core how many chunks a ``map_over`` successor gets."""

    name = "segment"

    def run(self, inputs: Mapping[str, Any], params: Mapping[str, Any]) -> ToolOutput:
        text = _need(inputs, "text")
        if not isinstance(text, str):
            raise ToolInputError(
                f"input 'text' has type {type(text).__name__}, expected str", "text"
            )
        limit = int(params.get("max_chars", 400))
        if limit < 1:
            raise ToolInputError(f"params.max_chars must be >= 1, got {limit}")
        segments: list[str] = []
        for sentence in _SENTENCE_END.split(text.strip()):
            if segments and len(segments[-1]) + 1 + len(sentence) <= limit:
                segments[-1] = f"{segments[-1]} {sentence}"
            elif sentence:
                segments.append(sentence)
        return ToolOutput({"segments": segments}, item_count=max(1, len(segments)))


HOST_TOOLS: dict[str, HostTool] = {t.name: t for t in (RouterTool(), SegmentTool())}
