"""Validation of a workflow spec: every problem at once, each with its location.

Pure function of the spec and the catalogue of known models and tools. A spec with any problem
must not run; ``ControlCore`` refuses to register it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from control.core.dag.spec import INPUT_NODE, JOINS, PORTS, DagSpec, NodeSpec
from control.core.tenancy.base import PRIORITY_CLASSES
from control.core.types import TASKS, TOOLS


@dataclass(frozen=True)
class ValidationProblem:
    code: str  # machine-readable: cycle, unknown_model, type_mismatch, ...
    location: str  # "nodes[llm]", "edges[3]", "outputs[answer]"
    message: str

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


def _types_match(src: str, dst: str) -> bool:
    src, dst = src.rstrip("?"), dst.rstrip("?")
    return src == dst or "any" in (src, dst)


def _check_node(
    n: NodeSpec, models: Mapping[str, str], tools: tuple[str, ...]
) -> list[ValidationProblem]:
    loc = f"nodes[{n.node_id}]"
    out: list[ValidationProblem] = []

    def bad(code: str, msg: str) -> None:
        out.append(ValidationProblem(code, loc, msg))

    if (n.tool is None) == (n.task is None):
        bad("bad_node", "set exactly one of 'task' (with 'model') or 'tool'")
    elif n.tool is not None and n.tool not in tools:
        bad("unknown_tool", f"unknown tool {n.tool!r}; known: {', '.join(tools)}")
    elif n.task is not None:
        if n.task not in TASKS:
            bad("unknown_task", f"unknown task {n.task!r}; known: {', '.join(TASKS)}")
        if n.model is None or n.model not in models:
            bad("unknown_model", f"unknown model {n.model!r}")
        elif n.task in TASKS and models[n.model] != n.task:
            bad(
                "model_task_mismatch", f"model {n.model!r} does {models[n.model]!r}, not {n.task!r}"
            )
    if n.join not in JOINS:
        bad("bad_join", f"join must be one of {JOINS}, got {n.join!r}")
    if n.retries < 0:
        bad("bad_retries", f"retries must be >= 0, got {n.retries}")
    if n.timeout_s is not None and n.timeout_s <= 0:
        bad("bad_timeout", f"timeout_s must be > 0, got {n.timeout_s}")
    if n.priority_class is not None and n.priority_class not in PRIORITY_CLASSES:
        bad("bad_priority", f"priority_class must be one of {PRIORITY_CLASSES}")
    if n.map_over is not None and n.kind in PORTS and n.map_over not in PORTS[n.kind][0]:
        bad("bad_map_over", f"map_over {n.map_over!r} is not an input of {n.kind!r}")
    return out


def _check_edges(spec: DagSpec, by_id: Mapping[str, NodeSpec]) -> list[ValidationProblem]:
    out: list[ValidationProblem] = []
    feeds: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, e in enumerate(spec.edges):
        loc = f"edges[{i}] {e.source}.{e.source_field} -> {e.target}.{e.target_field}"
        if e.source == INPUT_NODE:
            src_type = spec.inputs.get(e.source_field)
            src_ok = src_type is not None
        else:
            src = by_id.get(e.source)
            src_type = PORTS.get(src.kind, ({}, {}))[1].get(e.source_field) if src else None
            src_ok = src_type is not None
        dst = by_id.get(e.target)
        dst_type = PORTS.get(dst.kind, ({}, {}))[0].get(e.target_field) if dst else None
        if not src_ok:
            out.append(
                ValidationProblem("dangling_edge", loc, f"no output {e.source}.{e.source_field}")
            )
        if dst_type is None:
            out.append(
                ValidationProblem("dangling_edge", loc, f"no input {e.target}.{e.target_field}")
            )
        if src_ok and dst_type is not None and not _types_match(src_type or "", dst_type):
            msg = f"type mismatch: {src_type} feeds {dst_type}"
            out.append(ValidationProblem("type_mismatch", loc, msg))
        if e.when is not None and (e.source not in by_id or by_id[e.source].tool != "router"):
            out.append(
                ValidationProblem("bad_when", loc, "'when' is only allowed on a router's edges")
            )
        if dst_type is not None:
            feeds[(e.target, e.target_field)].append(i)
    for n in spec.nodes:
        for fld, typ in PORTS.get(n.kind, ({}, {}))[0].items():
            edges = feeds.get((n.node_id, fld), [])
            loc = f"nodes[{n.node_id}].{fld}"
            if not edges and not typ.endswith("?"):
                out.append(ValidationProblem("unfed_input", loc, "required input has no edge"))
            if len(edges) > 1 and n.join != "any" and not _exclusive(spec, edges):
                msg = f"fed by edges {edges}; use join 'any' or route them exclusively"
                out.append(ValidationProblem("doubly_fed", loc, msg))
    return out


def _map_sources(spec: DagSpec, by_id: Mapping[str, NodeSpec]) -> list[ValidationProblem]:
    """A ``map_over`` field must be fed by a node that splits its output (its item count
    sets the number of chunks); a workflow input has no item count the core knows, so
    mapping over one would run a single chunk over the whole list."""
    out: list[ValidationProblem] = []
    for e in spec.edges:
        node = by_id.get(e.target)
        if node is None or node.map_over != e.target_field or e.source != INPUT_NODE:
            continue
        msg = (
            f"map_over {node.map_over!r} is fed by the workflow input "
            f"'input.{e.source_field}': map over a node's output instead (e.g. a 'segment' "
            "tool that splits the input)"
        )
        out.append(ValidationProblem("bad_map_over", f"nodes[{node.node_id}].map_over", msg))
    return out


def _exclusive(spec: DagSpec, edge_indexes: list[int]) -> bool:
    """Edges from one router with distinct labels never fire together."""
    edges = [spec.edges[i] for i in edge_indexes]
    labels = [e.when for e in edges]
    return (
        len({e.source for e in edges}) == 1
        and None not in labels
        and len(set(labels)) == len(labels)
    )


def _cycles(spec: DagSpec, ids: set[str]) -> list[list[str]]:
    """Strongly connected components that contain a cycle (iterative Tarjan), sorted."""
    succ: dict[str, list[str]] = defaultdict(list)
    for e in spec.edges:
        if e.source in ids and e.target in ids:
            succ[e.source].append(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(ids):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, pos = work.pop()
            if pos == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            children = succ[v]
            if pos < len(children):
                work.append((v, pos + 1))
                w = children[pos]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in succ[v]:
                    found.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return sorted(found)


def _unreachable(spec: DagSpec, ids: set[str]) -> list[str]:
    succ: dict[str, list[str]] = defaultdict(list)
    for e in spec.edges:
        succ[e.source].append(e.target)
    seen = {INPUT_NODE}
    todo = [INPUT_NODE]
    while todo:
        for w in succ[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return sorted(ids - seen)


def validate(
    spec: DagSpec, known_models: Mapping[str, str], known_tools: tuple[str, ...] | None = None
) -> tuple[ValidationProblem, ...]:
    """Every problem of ``spec``; empty when it may run. ``known_models``: model key -> task."""
    tools = TOOLS if known_tools is None else known_tools
    problems: list[ValidationProblem] = []
    if not spec.nodes:
        problems.append(ValidationProblem("empty", "nodes", "a workflow needs at least one node"))
    by_id: dict[str, NodeSpec] = {}
    for n in spec.nodes:
        if n.node_id in by_id or n.node_id == INPUT_NODE:
            problems.append(
                ValidationProblem(
                    "duplicate_id", f"nodes[{n.node_id}]", "node id used twice or reserved"
                )
            )
        by_id.setdefault(n.node_id, n)
        problems.extend(_check_node(n, known_models, tools))
    problems.extend(_check_edges(spec, by_id))
    problems.extend(_map_sources(spec, by_id))
    ids = set(by_id)
    for comp in _cycles(spec, ids):
        msg = f"cycle through {' -> '.join(comp)}"
        problems.append(ValidationProblem("cycle", f"nodes[{','.join(comp)}]", msg))
    for node_id in _unreachable(spec, ids):
        msg = "not reachable from the workflow inputs"
        problems.append(ValidationProblem("unreachable", f"nodes[{node_id}]", msg))
    for name, ref in spec.outputs.items():
        node, _, fld = ref.partition(".")
        out_node = by_id.get(node)
        if out_node is None or fld not in PORTS.get(out_node.kind, ({}, {}))[1]:
            problems.append(
                ValidationProblem("bad_output", f"outputs[{name}]", f"no output {ref!r}")
            )
    return tuple(problems)
