"""Workflow DAG spec: nodes, edges with input mappings, joins, routes, map nodes, QoS.

A spec is built from a plain dict (parsed from JSON or YAML by the caller; the core parses no
text). Shape::

    {"workflow": "rag", "inputs": {"query": "text"}, "outputs": {"answer": "llm.text"},
     "nodes": [{"id": "embed", "task": "embed", "model": "minilm:1"},
               {"id": "search", "tool": "vector_search", "params": {"index": "docs"}}, ...],
     "edges": [{"from": "input.query", "to": "embed.text"},
               {"from": "embed.embedding", "to": "search.embedding"}, ...]}

Node keys: ``id``, ``task`` + ``model`` or ``tool``, ``join`` ("all" | "any"), ``retries``,
``timeout_s``, ``priority_class``, ``deadline_s`` (relative to run start), ``map_over`` (input
field split into chunks run in parallel and merged in order), ``params``. Edge keys: ``from``,
``to`` (``node.field``; ``input.X`` is a workflow input) and ``when`` (a router's label).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

#: Pseudo-node whose fields are the workflow's inputs.
INPUT_NODE = "input"
JOINS: tuple[str, ...] = ("all", "any")

#: Port types per task/tool: (inputs {field: type}, outputs {field: type}). A type ending in
#: "?" marks an optional input. "any" matches every type.
PORTS: Mapping[str, tuple[Mapping[str, str], Mapping[str, str]]] = MappingProxyType(
    {
        "embed": ({"text": "text"}, {"embedding": "vector"}),
        # ``documents`` stays first: ``linear_pipeline`` chains a stage's first output.
        # ``scores`` are per input document (input order); ``order`` holds input indices,
        # best first (the executor's rerank adapter returns all three).
        "rerank": (
            {"query": "text", "documents": "documents"},
            {"documents": "documents", "scores": "scores", "order": "indices"},
        ),
        # ``finish_reason``: "stop" (end of sequence or a stop string) or "length"
        "generate": (
            {"prompt": "text", "context": "documents?"},
            {"text": "text", "finish_reason": "label"},
        ),
        "classify": ({"text": "text"}, {"label": "label"}),
        "vector_search": ({"embedding": "vector"}, {"documents": "documents"}),
        "router": ({"value": "any"}, {"label": "label", "value": "any"}),
        "segment": ({"text": "text"}, {"segments": "text"}),
    }
)

_EMPTY: Mapping[str, object] = MappingProxyType({})
_EMPTY_STR: Mapping[str, str] = _EMPTY  # type: ignore[assignment]  # the same empty mapping


class SpecFormatError(ValueError):
    """The dict is not shaped like a workflow spec (missing key, wrong type). ``problems``
    lists every one found, each 'location: message' (``nodes[emb].retries: ...``)."""

    def __init__(self, *problems: str) -> None:
        super().__init__("; ".join(problems))
        self.problems: tuple[str, ...] = problems


@dataclass(frozen=True)
class NodeSpec:
    node_id: str
    task: str | None = None  # model task (embed, rerank, generate, classify)
    model: str | None = None  # model key name:version
    tool: str | None = None  # vector_search, router, segment
    join: str = "all"
    retries: int = 0
    timeout_s: float | None = None
    priority_class: str | None = None  # None: the request's class
    deadline_s: float | None = None  # relative to run start
    map_over: str | None = None
    params: Mapping[str, object] = field(default_factory=lambda: _EMPTY)

    @property
    def kind(self) -> str:
        """The task or tool name: the key into ``PORTS``."""
        return self.tool if self.tool is not None else (self.task or "")

    @property
    def is_tool(self) -> bool:
        return self.tool is not None


@dataclass(frozen=True)
class EdgeSpec:
    source: str
    source_field: str
    target: str
    target_field: str
    when: str | None = None


@dataclass(frozen=True)
class DagSpec:
    workflow: str
    nodes: tuple[NodeSpec, ...]
    edges: tuple[EdgeSpec, ...]
    inputs: Mapping[str, str] = field(default_factory=lambda: _EMPTY_STR)
    outputs: Mapping[str, str] = field(default_factory=lambda: _EMPTY_STR)  # name -> "node.field"

    def node(self, node_id: str) -> NodeSpec:
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"workflow {self.workflow!r} has no node {node_id!r}")

    def validate(
        self, known_models: Mapping[str, str], known_tools: tuple[str, ...] | None = None
    ) -> tuple[object, ...]:
        """Every problem of this spec at once (empty tuple: valid). See ``dag.validate``.

        ``known_models`` maps model key -> task.
        """
        from control.core.dag.validate import validate

        return validate(self, known_models, known_tools)


def dag_from_dict(raw: Mapping[str, object]) -> DagSpec:
    """Build a spec from a parsed JSON/YAML dict. Raises SpecFormatError listing every
    malformed part at once, each located (``nodes[emb].retries``); semantic problems (cycles,
    unknown models...) are left to ``validate``."""
    from control.core.dag.spec_parse import edge_from_dict, node_from_dict, str_map

    if not isinstance(raw, Mapping) or "workflow" not in raw:
        raise SpecFormatError("spec: expected a mapping with a 'workflow' name")
    nodes_raw = raw.get("nodes") or []
    edges_raw = raw.get("edges") or []
    if not isinstance(nodes_raw, list) or not isinstance(edges_raw, list):
        raise SpecFormatError("spec: 'nodes' and 'edges' must be lists")
    problems: list[str] = []
    nodes = tuple(node_from_dict(i, n, problems) for i, n in enumerate(nodes_raw))
    edges = tuple(edge_from_dict(i, e, problems) for i, e in enumerate(edges_raw))
    inputs = str_map(raw.get("inputs"), "inputs", problems)
    outputs = str_map(raw.get("outputs"), "outputs", problems)
    if problems:
        raise SpecFormatError(*problems)
    return DagSpec(str(raw["workflow"]), nodes, edges, inputs, outputs)  # type: ignore[arg-type]


def linear_pipeline(workflow: str, stages: list[tuple[str, str, str, str]]) -> DagSpec:
    """The one-path case: ``stages`` = [(node_id, model_key, task, input_field)]; each stage's
    first output feeds the next stage's ``input_field``; the first reads ``input.text``."""
    nodes = tuple(NodeSpec(node_id=n, task=t, model=m) for n, m, t, _ in stages)
    edges = []
    prev: tuple[str, str] = (INPUT_NODE, "text")
    for node_id, _m, task, in_field in stages:
        edges.append(EdgeSpec(prev[0], prev[1], node_id, in_field))
        prev = (node_id, next(iter(PORTS[task][1])))
    return DagSpec(
        workflow,
        nodes,
        tuple(edges),
        MappingProxyType({"text": "text"}),
        MappingProxyType({"output": f"{prev[0]}.{prev[1]}"}),
    )
