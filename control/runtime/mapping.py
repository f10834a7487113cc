"""Translation between the core's step vocabulary and the executor's.

The core names ports after workflow specs (``embed.embedding``, ``generate.context``); the
executor's adapters name them after what they compute (``vector``, ``documents``). A step's
inputs are core ``InputRef`` bindings; the executor wants literals (request payload, host tool
outputs) or its own ``InputRef`` for outputs a worker holds. Map steps are keyed ``node#chunk``
in the executor, so every chunk's output is kept apart.

Pure functions plus one small record; the actuator owns the stores they read.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from control.core.actions import BatchItem as CoreItem
from control.core.dag.spec import INPUT_NODE
from control.core.types import InputRef as CoreRef
from control.executor.protocol import AdapterRef, BatchItem, GenParams, StepKey
from control.executor.protocol import InputRef as ExecRef

#: (producer kind, core output field) -> executor output field.
OUTPUT_ALIAS: Mapping[tuple[str, str], str] = {("embed", "embedding"): "vector"}
#: (consumer kind, core input field) -> executor input field.
INPUT_ALIAS: Mapping[tuple[str, str], str] = {
    ("vector_search", "embedding"): "query_vector",
    ("generate", "context"): "documents",
}
#: GenParams fields a node's params (or the run's sampling) may set.
_GEN_FIELDS = ("temperature", "top_p", "seed", "top_k", "busy_ms", "templated")


class InputUnavailable(LookupError):
    """A step input cannot be found (payload field missing, output released)."""


@dataclass(frozen=True)
class Fetch:
    """An input that must be fetched from a worker first (an element of a list output, or one
    part of a merged map output): ``value = fetched[field]`` then ``[select]`` if set."""

    run_id: str
    exec_node: str
    field: str
    select: int | None


def exec_node(node_id: str, chunk: int | None) -> str:
    """The executor's node id of one step (a map chunk gets its own)."""
    return node_id if chunk is None else f"{node_id}#{chunk}"


def lost_outputs(nodes: tuple[str, ...] | None) -> tuple[tuple[str, int | None], ...] | None:
    """The core's (node id, chunk) of the executor node ids an item lost (``exec_node``
    reversed); None stays None (the executor did not say)."""
    if nodes is None:
        return None
    out: list[tuple[str, int | None]] = []
    for n in nodes:
        node, sep, chunk = n.rpartition("#")
        out.append((node, int(chunk)) if sep and chunk.isdigit() else (n, None))
    return tuple(out)


def out_field(kind: str, core_field: str) -> str:
    return OUTPUT_ALIAS.get((kind, core_field), core_field)


@dataclass
class Stores:
    """What the resolver reads: payloads by run, host-held outputs and executor-held step ids.

    ``kind_of(run_id, node_id)`` gives the producing node's task or tool name.
    """

    payloads: dict[str, Mapping[str, Any]]
    host_outputs: dict[tuple[str, str], Mapping[str, Any]]
    exec_held: set[tuple[str, str]]
    kind_of: Callable[[str, str], str]


def resolve_ref(ref: CoreRef, st: Stores) -> Any:
    """A literal, an executor InputRef, or a Fetch for one core reference (raises
    InputUnavailable when a request input or host output is missing)."""
    if ref.node_id == INPUT_NODE:
        payload = st.payloads.get(ref.run_id, {})
        if ref.field not in payload:
            raise InputUnavailable(f"request {ref.run_id} has no input {ref.field!r}")
        return payload[ref.field]
    fld = out_field(st.kind_of(ref.run_id, ref.node_id), ref.field)
    split = ref.chunk is not None and (
        (ref.run_id, exec_node(ref.node_id, ref.chunk)) in st.host_outputs
        or (ref.run_id, exec_node(ref.node_id, ref.chunk)) in st.exec_held
    )
    node = exec_node(ref.node_id, ref.chunk if split else None)
    select = None if split else ref.chunk
    held = st.host_outputs.get((ref.run_id, node))
    if held is not None:
        if fld not in held:
            raise InputUnavailable(f"{ref.run_id}/{node} has no output {fld!r}")
        return held[fld] if select is None else held[fld][select]
    if select is None:
        return ExecRef(ref.run_id, node, fld)
    return Fetch(ref.run_id, node, fld, select)


def resolve_inputs(item: CoreItem, kind: str, st: Stores) -> dict[str, Any]:
    """Executor inputs of one core item. Several refs in one binding (a merged map output)
    become a list in chunk order; executor-held parts of such a list are Fetch records."""
    out: dict[str, Any] = {}
    for binding in item.inputs:
        name = INPUT_ALIAS.get((kind, binding.target_field), binding.target_field)
        values = [resolve_ref(r, st) for r in binding.refs]
        if len(values) == 1:
            out[name] = values[0]
        else:
            out[name] = [
                Fetch(v.run_id, v.node_id, v.field, None) if isinstance(v, ExecRef) else v
                for v in values
            ]
    return out


def pending_fetches(inputs: Mapping[str, Any]) -> list[Fetch]:
    """Every Fetch in resolved inputs (top level or inside a merged list)."""
    found: list[Fetch] = []
    for v in inputs.values():
        if isinstance(v, Fetch):
            found.append(v)
        elif isinstance(v, list):
            found.extend(x for x in v if isinstance(x, Fetch))
    return found


def substitute(inputs: Mapping[str, Any], fetched: Mapping[Fetch, Any]) -> dict[str, Any]:
    """Inputs with every Fetch replaced by its fetched value."""

    def sub(v: Any) -> Any:
        if isinstance(v, Fetch):
            return fetched[v]
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v

    return {k: sub(v) for k, v in inputs.items()}


#: Tokens a generate step may produce when neither its node nor its request sets a limit.
DEFAULT_MAX_TOKENS = 32
#: Sampling fields a caller may set per run; they apply to the run's generate steps only
#: (``templated``: set by the chat route, whose prompt the gateway rendered in the chat format).
SAMPLING_FIELDS = ("temperature", "top_p", "seed", "stop", "templated")


def gen_params(
    item: CoreItem, kind: str, stream_default: bool, sampling: Mapping[str, Any] | None = None
) -> GenParams:
    """Executor parameters from the node's params (``max_tokens``, sampling, ``top_k``, ...);
    the run's own ``sampling`` (temperature, top_p, seed, stop) overrides them for generate
    steps."""
    p = dict(item.params)
    if sampling and kind == "generate":
        p.update({k: v for k, v in sampling.items() if k in SAMPLING_FIELDS and v is not None})
    max_tokens = int(p.get("max_tokens") or item.max_output_tokens or DEFAULT_MAX_TOKENS)
    kwargs: dict[str, Any] = {k: p[k] for k in _GEN_FIELDS if k in p}
    if "stop" in p:
        kwargs["stop"] = tuple(p["stop"])  # type: ignore[arg-type]
    stream = bool(p.get("stream", stream_default)) and kind == "generate"
    return GenParams(max_tokens=max_tokens, stream=stream, **kwargs)


def exec_item(
    item: CoreItem,
    inputs: Mapping[str, Any],
    params: GenParams,
    *,
    return_output: bool = False,
    adapter: AdapterRef | None = None,
) -> BatchItem:
    """The executor's item of a core item; ``return_output`` for steps feeding the caller,
    ``adapter`` the LoRA adapter a generate step runs with."""
    step = StepKey(item.request_id, exec_node(item.node_id, item.chunk), item.attempt)
    return BatchItem(step, item.idempotency_key, dict(inputs), params, return_output, adapter)
