"""Static structure of a workflow spec, computed once when the workflow is registered.

``CompiledDag`` holds what every run of the workflow would otherwise recompute: edges per node,
topological layers, models later nodes need (speculative preloads), bindings of nodes fed only
by workflow inputs, each node's required input fields, and a fresh run's initial state.
``control.core.dag.run`` re-exports it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from control.core.dag.spec import INPUT_NODE, PORTS, DagSpec, EdgeSpec, NodeSpec

if TYPE_CHECKING:
    from control.core.dag.step import NodeState


class CompiledDag:
    """Static structure of a spec, computed once per registered workflow."""

    def __init__(self, spec: DagSpec) -> None:
        self.spec = spec
        self.nodes: dict[str, NodeSpec] = {n.node_id: n for n in spec.nodes}
        self.in_edges: dict[str, list[EdgeSpec]] = defaultdict(list)
        self.out_edges: dict[str, list[EdgeSpec]] = defaultdict(list)
        for e in spec.edges:
            self.in_edges[e.target].append(e)
            self.out_edges[e.source].append(e)
        self.layers = self._layers()
        self.order = tuple(n for layer in self.layers for n in layer)
        first = set(self.layers[0]) if self.layers else set()
        #: models of nodes that cannot run at the start (speculative preload candidates)
        self.later_models = tuple(
            dict.fromkeys(
                self.nodes[n].model for n in self.order if n not in first and self.nodes[n].model
            )
        )
        self.first_models = frozenset(self.nodes[n].model for n in first if self.nodes[n].model)
        #: (node states, ready nodes, terminal count, status) of a fresh run: it depends on the
        #: structure only, so it is computed by the first DagRun and copied by the others
        self.static_inputs = self._static_inputs()
        #: per node: its required input fields (ports not marked optional with "?")
        self.required: dict[str, tuple[str, ...]] = {
            n: tuple(f for f, t in PORTS[node.kind][0].items() if not t.endswith("?"))
            for n, node in self.nodes.items()
        }
        self.initial: tuple[dict[str, NodeState], tuple[str, ...], int, str] | None = None
        #: per node: its input edges grouped by target field, fields sorted (the order bindings
        #: are listed in), edges in spec order within a field (the order their refs merge in)
        self.bind_plan: dict[str, tuple[tuple[str, tuple[EdgeSpec, ...]], ...]] = {}
        for node_id in self.nodes:
            grouped: dict[str, list[EdgeSpec]] = {}
            for e in self.in_edges.get(node_id, []):
                grouped.setdefault(e.target_field, []).append(e)
            self.bind_plan[node_id] = tuple((f, tuple(es)) for f, es in sorted(grouped.items()))
        #: declared outputs as (name, node, field), parsed once
        self.output_refs: tuple[tuple[str, str, str], ...] = tuple(
            (name, *ref.partition(".")[::2]) for name, ref in spec.outputs.items()
        )
        #: request size class -> ``remaining_path`` of a run of that size: a pure
        #: cache filled by ``control.core.step_order`` (a replaced workflow is a new CompiledDag)
        self.remaining_memo: dict[tuple[int, int], dict[str, int]] = {}

    def _static_inputs(self) -> dict[str, tuple[tuple[str, tuple[str, ...]], ...]]:
        """Per node fed only by workflow inputs: (target field, source fields) in binding
        order. Such bindings differ between runs only by run id, so they are built from this."""
        out = {}
        for node_id, node in self.nodes.items():
            edges = self.in_edges.get(node_id, [])
            if any(e.source != INPUT_NODE for e in edges):
                continue
            by_field: dict[str, list[str]] = {}
            for e in edges:
                if node.join == "any" and e.target_field in by_field:
                    continue
                by_field.setdefault(e.target_field, []).append(e.source_field)
            out[node_id] = tuple((f, tuple(v)) for f, v in sorted(by_field.items()))
        return out

    def _layers(self) -> tuple[tuple[str, ...], ...]:
        deps = {
            n: {e.source for e in self.in_edges[n] if e.source != INPUT_NODE} for n in self.nodes
        }
        layers: list[tuple[str, ...]] = []
        done: set[str] = set()
        while len(done) < len(deps):
            layer = tuple(sorted(n for n, d in deps.items() if n not in done and d <= done))
            if not layer:
                raise ValueError(f"workflow {self.spec.workflow!r} has a cycle; validate it first")
            layers.append(layer)
            done.update(layer)
        return tuple(layers)

    def critical_path(self, estimate_us: Callable[[NodeSpec], int]) -> tuple[tuple[str, ...], int]:
        """Longest path by estimated node latency: (node ids in order, total microseconds)."""
        best: dict[str, tuple[int, str | None]] = {}
        for n in self.order:
            preds = [e.source for e in self.in_edges[n] if e.source != INPUT_NODE]
            prev = max(preds, key=lambda p: (best[p][0], p), default=None)
            base = best[prev][0] if prev is not None else 0
            best[n] = (base + estimate_us(self.nodes[n]), prev)
        if not best:
            return (), 0
        end = max(best, key=lambda n: (best[n][0], n))
        path: list[str] = []
        cur: str | None = end
        while cur is not None:
            path.append(cur)
            cur = best[cur][1]
        return tuple(reversed(path)), best[end][0]

    def remaining_path(self, estimate_us: Callable[[NodeSpec], int]) -> dict[str, int]:
        """Per node: the longest path by estimated latency from it (its own estimate included)
        to the end of the DAG, the work still ahead of a run once that node is ready (HEFT's
        upward rank). A conditional branch counts as if taken: an upper bound."""
        ahead: dict[str, int] = {}
        for n in reversed(self.order):
            after = [ahead[e.target] for e in self.out_edges.get(n, ()) if e.target in ahead]
            ahead[n] = estimate_us(self.nodes[n]) + max(after, default=0)
        return ahead

    def caller_field(self, node_id: str, port: str) -> str:
        """Input ``port`` of ``node_id`` (``text``, ``documents[3]``) as the caller names it:
        ``inputs.<name>`` when a workflow input feeds it (``inputs.docs[3]``), else
        ``<node>.<port>`` (fed by another node's output)."""
        name, bracket, rest = port.partition("[")
        for e in self.in_edges.get(node_id, []):
            if e.source == INPUT_NODE and e.target_field == name:
                return f"inputs.{e.source_field}{bracket}{rest}"
        return f"{node_id}.{port}"
