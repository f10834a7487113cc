"""What a finished run leaves in its request row: status, usage totals, outputs, per-node figures.

Pure functions of the runtime's :class:`RunResult` and the step reports the usage sink saw; the
inference service turns their output into one :class:`FinishRequest`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from control.runtime.types import RunResult, UsageRecord

#: Runtime statuses -> request statuses (a preempted or timed-out run failed for its caller).
REQUEST_STATUS = {"succeeded": "succeeded", "rejected": "rejected", "failed": "failed",
                  "preempted": "failed", "timed_out": "failed", "cancelled": "cancelled"}  # fmt: skip
#: Largest JSON text of one node output kept in the row; bigger values are summarised.
MAX_NODE_OUTPUT_CHARS = 2000


@dataclass
class StepTiming:
    """One step as the usage sink saw it: its bill and when it ended (ms after acceptance)."""

    usage: UsageRecord
    done_ms: int


@dataclass
class RunTrace:
    """Per-run bookkeeping of the gateway while the run goes on."""

    accepted_at: float  # monotonic seconds
    steps: list[StepTiming] = field(default_factory=list)


def device_ms(usage: UsageRecord) -> int:
    """The ledger's device milliseconds of a step (microseconds rounded up)."""
    return (usage.device_us + 999) // 1000


def usage_totals(usage: tuple[UsageRecord, ...] | list[UsageRecord]) -> dict[str, int]:
    """Integer sums of a run's billed steps, as the ledger stores them."""
    return {
        "input_tokens": sum(u.input_tokens for u in usage),
        "output_tokens": sum(u.output_tokens for u in usage),
        "device_ms": sum(device_ms(u) for u in usage),
        "cost_units": sum(u.cost_units for u in usage),
    }


#: Types that are JSON values as they are (``bool`` included: ``type(True)`` is ``bool``).
_PLAIN = frozenset({str, int, float, bool, type(None)})


def jsonable(value: Any) -> Any:
    """Outputs as JSON values (tensors and arrays arrive as lists from the runtime)."""
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if _PLAIN.issuperset(map(type, value)):  # a vector: one scan in C, no call per element
            return list(value)
        return [jsonable(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


#: The longest JSON text of one float (``-2.2250738585072014e-308``); ``true``, ``false``,
#: ``null``, ``NaN`` and ``-Infinity`` are shorter.
_MAX_FLOAT_CHARS = 24
_SHORT_SCALARS = frozenset({float, bool, type(None)})


def _json_chars(value: Any) -> int:
    """The length of ``json.dumps(value, default=str)``, or bounds of it that decide
    ``small`` without encoding: a vector (the usual output) takes at least 3 characters an
    item and at most 26 for floats (item and ", "). Encoding it only to measure it cost more
    than everything else of a run's per-node view."""
    if type(value) is list:
        n = len(value)
        if 3 * n > MAX_NODE_OUTPUT_CHARS:
            return 3 * n  # long whatever its items
        if (_MAX_FLOAT_CHARS + 2) * n <= MAX_NODE_OUTPUT_CHARS and _SHORT_SCALARS.issuperset(
            map(type, value)
        ):
            return (_MAX_FLOAT_CHARS + 2) * n  # short whatever its floats
    return len(json.dumps(value, default=str))


def small(value: Any) -> Any:
    """``value`` if its JSON is short, else a summary saying what it was (a vector, a long
    text): the per-node view must stay small; the full outputs are in ``outputs``."""
    if isinstance(value, list):
        if _json_chars(value) <= MAX_NODE_OUTPUT_CHARS:
            return value
        return {"summary": f"list of {len(value)} items", "head": value[:8]}
    text = json.dumps(value, default=str)
    if len(text) <= MAX_NODE_OUTPUT_CHARS:
        return value
    if isinstance(value, str):
        return {"summary": f"text of {len(value)} characters", "head": value[:400]}
    return {"summary": f"{type(value).__name__} of {len(text)} JSON characters"}


def node_views(
    trace: RunTrace, outputs: Mapping[str, Any], output_refs: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Per node: its step figures (model, device, tokens, device ms, when it ended) and the
    workflow outputs it produced (``output_refs``: output name -> "node.port")."""
    views: dict[str, dict[str, Any]] = {}
    for step in trace.steps:
        u = step.usage
        views[u.node_id] = {
            "model": u.model, "device": u.device, "attempt": u.attempt,
            "input_tokens": u.input_tokens, "output_tokens": u.output_tokens,
            "device_ms": device_ms(u), "done_ms": step.done_ms, "batch_size": u.batch_size,
        }  # fmt: skip
        if u.ttft_ms is not None:  # a generate step: its prefix cache hit and first token
            views[u.node_id].update(prefix_hit_tokens=u.prefix_hit_tokens, ttft_ms=u.ttft_ms)
    for name, ref in output_refs.items():
        node, _, port = ref.partition(".")
        if name in outputs:
            view = views.setdefault(node, {})
            view.setdefault("outputs", {})[port] = small(outputs[name])
    return views


def result_body(
    result: RunResult, trace: RunTrace, output_refs: Mapping[str, str]
) -> tuple[str, dict[str, Any], str | None]:
    """(request status, stored result, error) of a finished run."""
    status = REQUEST_STATUS.get(result.status, "failed")
    if status == "rejected" and result.retry_after_s is None:
        status = "failed"  # refused by the core (not admission): nothing to retry later
    if status == "rejected":
        body = {"retry_after_s": result.retry_after_s or 1.0, "reason": result.reason}
        if result.timeline is not None:  # its admission verdict, for the request timeline
            body["timeline"] = dict(result.timeline)
        return status, body, result.reason
    usage = [s.usage for s in trace.steps] or list(result.usage)
    outputs = jsonable(dict(result.outputs))
    body = {
        "status": result.status,
        "usage": usage_totals(usage),
        "nodes": node_views(trace, outputs, output_refs),
    }
    if result.reissued:  # steps timed out or preempted, and what replaced them
        body["reissued"] = [dict(r) for r in result.reissued]
    if result.timeline is not None:  # spans of its steps and the core's decisions
        body["timeline"] = dict(result.timeline)
    if status == "succeeded":
        body["outputs"] = outputs
        return status, body, None
    if result.fault is not None:  # the fault class decides the caller's answer (a 422)
        body["fault"] = result.fault
        body["field"] = result.field
    return status, body, result.error or result.reason or f"run {result.status}"
