"""A workflow spec as the canvas's graph and back (pure: no Streamlit, no HTTP).

The canvas shows one box per spec node plus the ``input`` pseudo-node (the workflow's inputs)
and one arrow per (source, target) pair of spec edges, labelled with the fields it carries and
a router's ``when`` label. An arrow drawn on the canvas becomes a spec edge whose fields are
guessed from :data:`PORT_HINTS` (the source's first output, the target's first input not yet
fed); the side panel and the YAML correct a wrong guess, and the API's validator has the last
word on every spec (the console never imports the core, so these hints only propose).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The pseudo-node whose fields are the workflow's inputs (``input.query``).
INPUT = "input"
#: Where problems that name no node are listed.
WORKFLOW = "workflow"
#: Port names per task or tool: (inputs, outputs), first ones first (as the core's PORTS).
PORT_HINTS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "embed": (("text",), ("embedding",)),
    "rerank": (("query", "documents"), ("documents", "scores", "order")),
    "generate": (("prompt", "context"), ("text", "finish_reason")),
    "classify": (("text",), ("label",)),
    "vector_search": (("embedding",), ("documents",)),
    "router": (("value",), ("label", "value")),
    "segment": (("text",), ("segments",)),
}
#: Kinds that run a model (``task``); the rest are tools.
TASKS = ("embed", "rerank", "generate", "classify")
TOOLS = ("vector_search", "router", "segment")


@dataclass(frozen=True)
class GraphNode:
    """One box: the node's id, what it runs (``kind``, ``model``) and its open problems."""

    id: str
    kind: str
    model: str
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class GraphEdge:
    """One arrow from ``source`` to ``target``; ``label`` names the fields it carries."""

    source: str
    target: str
    label: str


def kind_of(node: Mapping[str, Any]) -> str:
    """The task or tool a node runs ("" when it names neither)."""
    return str(node.get("tool") or node.get("task") or "")


def ref_node(ref: Any) -> str:
    """The node part of ``node.field`` (``input`` for a workflow input)."""
    return str(ref).split(".", 1)[0]


def ref_field(ref: Any) -> str:
    return str(ref).split(".", 1)[1] if "." in str(ref) else ""


def graph_of(
    spec: Mapping[str, Any], problems: Mapping[str, Sequence[str]] | None = None
) -> tuple[list[GraphNode], list[GraphEdge]]:
    """The boxes (``input`` first) and arrows of ``spec``; ``problems`` by node id."""
    problems = problems or {}
    nodes = [GraphNode(INPUT, "inputs", ", ".join(spec.get("inputs") or {}))]
    for node in spec.get("nodes") or []:
        nid = str(node.get("id"))
        nodes.append(GraphNode(nid, kind_of(node), str(node.get("model") or ""),
                               tuple(problems.get(nid, ()))))  # fmt: skip
    carried: dict[tuple[str, str], list[str]] = {}
    for edge in spec.get("edges") or []:
        pair = (ref_node(edge.get("from")), ref_node(edge.get("to")))
        text = f"{ref_field(edge.get('from'))}→{ref_field(edge.get('to'))}"
        if edge.get("when"):
            text += f" [when {edge['when']}]"
        carried.setdefault(pair, []).append(text)
    edges = [GraphEdge(s, t, ", ".join(texts)) for (s, t), texts in carried.items()]
    return nodes, edges


def pairs_of(spec: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The (source, target) node pairs the spec's edges connect."""
    return {(ref_node(e.get("from")), ref_node(e.get("to"))) for e in spec.get("edges") or []}


def guess_edge(spec: Mapping[str, Any], source: str, target: str) -> dict[str, str]:
    """The spec edge a new arrow ``source -> target`` stands for: the source's first output
    (the first workflow input for ``input``) into the target's first input not yet fed."""
    nodes = {str(n.get("id")): n for n in spec.get("nodes") or []}
    if source == INPUT:
        out = next(iter(spec.get("inputs") or {}), "query")
    else:
        out = next(iter(PORT_HINTS.get(kind_of(nodes.get(source, {})), ((), ("out",)))[1]))
    ins = PORT_HINTS.get(kind_of(nodes.get(target, {})), (("in",), ()))[0] or ("in",)
    fed = {
        ref_field(e.get("to")) for e in spec.get("edges") or [] if ref_node(e.get("to")) == target
    }
    field = next((i for i in ins if i not in fed), ins[0])
    return {"from": f"{source}.{out}", "to": f"{target}.{field}"}


def apply_canvas(
    spec: Mapping[str, Any], node_ids: Iterable[str], pairs: Iterable[tuple[str, str]]
) -> dict[str, Any]:
    """``spec`` as the canvas now shows it: nodes missing there are dropped (with their
    edges), pairs no longer drawn lose their edges, and each newly drawn pair gains one
    guessed edge. Arrows into ``input``, onto themselves or between unknown nodes are ignored."""
    keep = set(node_ids) - {INPUT}
    out = dict(spec)
    out["nodes"] = [n for n in spec.get("nodes") or [] if str(n.get("id")) in keep]
    drawn = {(s, t) for s, t in pairs if s != t and t in keep and (s in keep or s == INPUT)}
    out["edges"] = [e for e in spec.get("edges") or []
                    if (ref_node(e.get("from")), ref_node(e.get("to"))) in drawn]  # fmt: skip
    for source, target in sorted(drawn - pairs_of(out)):
        out["edges"].append(guess_edge(out, source, target))
    return out


_NODE_AT = re.compile(r"^nodes\[([^\]]+)\]")
_EDGE_AT = re.compile(r"^edges\[(\d+)\]")


def problems_on_nodes(
    spec: Mapping[str, Any], problems: Sequence[Mapping[str, str]]
) -> dict[str, list[str]]:
    """The validator's problems grouped by the node they concern: ``nodes[id]...`` is that
    node, ``edges[i]...`` the node edge ``i`` feeds, otherwise a node the message quotes;
    the rest go under :data:`WORKFLOW`."""
    ids = [str(n.get("id")) for n in spec.get("nodes") or []]
    edges = list(spec.get("edges") or [])
    grouped: dict[str, list[str]] = {}
    for p in problems:
        where, message = str(p.get("location", "")), str(p.get("message", ""))
        owner = _owner(where, message, ids, edges)
        grouped.setdefault(owner, []).append(f"{where}: {message}" if where else message)
    return grouped


def _owner(where: str, message: str, ids: list[str], edges: list[Any]) -> str:
    if (m := _NODE_AT.match(where)) and m.group(1) in ids:
        return m.group(1)
    if (m := _EDGE_AT.match(where)) and int(m.group(1)) < len(edges):
        edge = edges[int(m.group(1))]
        for end in ("to", "from"):
            if isinstance(edge, Mapping) and ref_node(edge.get(end)) in ids:
                return ref_node(edge.get(end))
    return next((n for n in ids if f"'{n}'" in message or f'"{n}"' in message), WORKFLOW)
