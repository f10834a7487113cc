"""State machine of one workflow run over a validated ``DagSpec``.

``DagRun`` knows which nodes are ready, turns them into steps (one per chunk for a map node,
with a stable idempotency key across retries), records completions and failures, follows
router labels and joins, skips dead branches and ends exactly once; outputs lost with their
worker are recomputed through ``control.core.dag.lineage``. Where or when steps run is the
engine's job. ``StepRef`` and ``NodeState`` live in ``control.core.dag.step``.
"""

from __future__ import annotations

from control.core.actions import InputBinding
from control.core.dag import lineage
from control.core.dag.compiled import CompiledDag
from control.core.dag.spec import INPUT_NODE, EdgeSpec, NodeSpec
from control.core.dag.step import TERMINAL, NodeState, StepRef
from control.core.types import InputRef

__all__ = ["CompiledDag", "DagRun", "NodeState", "StepRef"]


class DagRun:
    """Progress of one run. Mutated only through its methods; ``status`` is "running" until
    it ends once as "succeeded" or "failed" (or "cancelled" through ``cancel``)."""

    def __init__(self, run_id: str, dag: CompiledDag, idempotency_base: str) -> None:
        self.run_id = run_id
        self.dag = dag
        self.status = "running"
        self.error: str | None = None
        self._idem = idempotency_base
        self._locs: dict[str, list[tuple[str | None, str | None]]] = {}
        self._labels: dict[str, str | None] = {}
        self._items: dict[str, int] = {}
        self._left: dict[str, int] = {}
        self.live: dict[str, StepRef] = {}
        self.lineage = lineage.Lineage()
        if dag.initial is None:
            self.state: dict[str, NodeState] = dict.fromkeys(dag.nodes, NodeState.WAITING)
            self._ready: list[str] = []
            self._terminal = 0
            for n in dag.order:
                self._evaluate(n)
            dag.initial = (dict(self.state), tuple(self._ready), self._terminal, self.status)
        else:
            # same result as evaluating every node: no node has run yet in any fresh run
            state, ready, self._terminal, self.status = dag.initial
            self.state = dict(state)
            self._ready = list(ready)

    # ----- queries
    def ready(self) -> tuple[str, ...]:
        """Nodes whose inputs are resolved and that have not been turned into steps yet."""
        return tuple(self._ready)

    def chunks(self, node_id: str) -> int:
        """How many steps (chunks) the node was split into once taken; 1 otherwise."""
        return len(self._locs.get(node_id, [0]))

    @property  # a real property: mypyc compiles a lambda-built one into a truthy attribute
    def ended(self) -> bool:
        return self.status != "running"

    def outputs(self) -> dict[str, tuple[InputRef, ...]]:
        """Declared workflow outputs -> where their data lives (succeeded runs)."""
        state, done = self.state, NodeState.DONE
        refs = self.dag.output_refs
        return {name: self._refs(n, fld) for name, n, fld in refs if state.get(n) == done}

    # ----- transitions
    def take_ready(self) -> list[StepRef]:
        """Ready nodes -> steps (one per chunk), marked running; resumed consumers first."""
        steps: list[StepRef] = self.lineage.take_resumed()
        if not self._ready:
            return steps
        nodes, state, running = self.dag.nodes, self.state, NodeState.RUNNING
        for node_id in self._ready:
            node = nodes[node_id]
            state[node_id] = running
            if node.map_over is None:  # the common case: one step, no chunk
                self._left[node_id] = 1
                self._locs[node_id] = [(None, None)]
                steps.append(self._new_step(node, None, 1))
                continue
            chunks = list(range(self._map_count(node)))
            self._left[node_id] = len(chunks)
            self._locs[node_id] = [(None, None)] * len(chunks)
            for c in chunks:
                steps.append(self._new_step(node, c, 1))
        self._ready.clear()
        return steps

    def on_step_done(
        self,
        key: str,
        device_id: str | None,
        replica_id: str | None,
        route_label: str | None = None,
        item_count: int | None = None,
    ) -> bool:
        """Record a successful attempt (False, no change: a key not live). May end the run."""
        step = self.live.pop(key, None)
        if step is None or self.ended:
            return False
        node_id = step.node_id
        self._locs[node_id][step.chunk or 0] = (device_id, replica_id)
        if step.recompute:  # the node was done already: only where its output lives changed
            self.lineage.recomputed(self, (node_id, step.chunk))
            return True
        if route_label is not None:
            self._labels[node_id] = route_label
        if item_count is not None:
            self._items[node_id] = self._items.get(node_id, 0) + item_count
        self._left[node_id] -= 1
        if self._left[node_id] == 0:
            self._set_terminal(node_id, NodeState.DONE)
        return True

    def on_step_failed(self, key: str, error: str, final: bool = False) -> StepRef | None:
        """A failed attempt: the retry (same idempotency key) while the node's ``retries`` last
        and it is not ``final`` (an unusable input); else fails the run and returns None."""
        step = self.live.pop(key, None)
        if step is None or self.ended:
            return None
        node = self.dag.nodes[step.node_id]
        # attempts lost with their device are the system's to retry, not the workflow's
        if not final and step.attempt - step.losses - step.spared <= node.retries:
            return self._new_step(node, step.chunk, step.attempt + 1, step.losses,
                                  step.recompute, step.spared)  # fmt: skip
        self._fail(step, f"has an unusable input: {error}" if final else
                   f"failed after {step.attempt} attempt(s): {error}")  # fmt: skip
        return None

    def on_step_lost(self, key: str, error: str, max_losses: int) -> StepRef | None:
        """An attempt lost with its device (or replica): the retry (same idempotency key, not
        counted in ``retries``) while under ``max_losses`` losses; then fails the run (no
        endless loop) and returns None. None and no change for a key that is not live."""
        if max_losses < 0:
            raise ValueError(f"max_losses must be >= 0, got {max_losses!r}")
        step = self.live.pop(key, None)
        if step is None or self.ended:
            return None
        if step.losses < max_losses:
            node = self.dag.nodes[step.node_id]
            return self._new_step(node, step.chunk, step.attempt + 1, step.losses + 1,
                                  step.recompute, step.spared)  # fmt: skip
        self._fail(step, f"lost its device {step.losses + 1} time(s) (limit {max_losses}): {error}")
        return None

    def cancel(self, status: str = "cancelled") -> tuple[str, ...]:
        """End the run now; returns the keys of its live steps (the caller drops them)."""
        keys = tuple(self.live)
        self.live.clear()
        if not self.ended:
            self.status = status
        return keys

    # ----- internals
    def _fail(self, step: StepRef, what: str) -> None:
        self.state[step.node_id] = NodeState.FAILED
        self.status = "failed"
        self.error = f"node {step.node_id!r} {what}"

    def _new_step(
        self, node: NodeSpec, chunk: int | None, attempt: int, losses: int = 0,
        recompute: int = 0, spared: int = 0,
    ) -> StepRef:  # fmt: skip
        suffix = node.node_id if chunk is None else f"{node.node_id}#{chunk}"
        if recompute:  # a key no earlier attempt had: never replayed, billed once
            suffix = f"{suffix}~r{recompute}"
        # positional: this runs for every step of every run
        step = StepRef(
            f"{self.run_id}/{suffix}/{attempt}", self.run_id, node.node_id, chunk, attempt,
            f"{self._idem}/{suffix}", self._bindings(node, chunk), losses, recompute, spared,
        )  # fmt: skip
        self.live[step.key] = step
        return step

    def _map_count(self, node: NodeSpec) -> int:
        for e in self.dag.in_edges[node.node_id]:
            if e.target_field == node.map_over and self._edge_live(e) and e.source != INPUT_NODE:
                return max(1, self._items.get(e.source, len(self._locs.get(e.source, [0]))))
        return 1

    def _refs(self, node_id: str, fld: str, chunk: int | None = None) -> tuple[InputRef, ...]:
        locs = self._locs.get(node_id, [])
        if chunk is not None:
            if len(locs) > 1:
                dev, rep = locs[chunk]
            else:
                dev, rep = locs[0] if locs else (None, None)
            return (InputRef(self.run_id, node_id, fld, dev, rep, chunk),)
        if len(locs) == 1:  # the common case: one step made the output
            dev, rep = locs[0]
            # a map node's lone chunk is stored as chunk 0 (``node#0``), like any chunk
            one = None if self.dag.nodes[node_id].map_over is None else 0
            return (InputRef(self.run_id, node_id, fld, dev, rep, one),)
        return tuple(
            InputRef(self.run_id, node_id, fld, dev, rep, i) for i, (dev, rep) in enumerate(locs)
        )

    def _bindings(self, node: NodeSpec, chunk: int | None) -> tuple[InputBinding, ...]:
        static = self.dag.static_inputs.get(node.node_id)
        if static is not None:
            rid = self.run_id
            out = []
            for f, sfs in static:  # plain loops: this runs for every first step of every run
                static_refs = [InputRef(rid, INPUT_NODE, sf, None, None) for sf in sfs]
                out.append(InputBinding(f, tuple(static_refs)))
            return tuple(out)
        # per target field (sorted), its live edges in spec order: "any" keeps the first only
        out = []
        state, labels, any_join = self.state, self._labels, node.join == "any"
        done, run_id = NodeState.DONE, self.run_id
        for fld, edges in self.dag.bind_plan[node.node_id]:
            merged: list[InputRef] | None = None
            for e in edges:
                src = e.source
                if src == INPUT_NODE:  # ``_edge_live`` written out: every step runs this
                    refs: tuple[InputRef, ...] = (
                        InputRef(run_id, INPUT_NODE, e.source_field, None, None),
                    )
                elif state.get(src) == done and (e.when is None or e.when == labels.get(src)):
                    split = chunk is not None and fld == node.map_over
                    refs = self._refs(src, e.source_field, chunk if split else None)
                else:
                    continue
                if merged is None:
                    merged = list(refs)
                    if any_join:
                        break
                else:
                    merged.extend(refs)
            if merged is not None:
                out.append(InputBinding(fld, tuple(merged)))
        return tuple(out)

    def _edge_live(self, e: EdgeSpec) -> bool:
        if e.source == INPUT_NODE:
            return True
        if self.state.get(e.source) != NodeState.DONE:
            return False
        return e.when is None or e.when == self._labels.get(e.source)

    def _edge_pending(self, e: EdgeSpec) -> bool:
        return e.source != INPUT_NODE and self.state.get(e.source) not in TERMINAL

    def _evaluate(self, node_id: str) -> None:
        """Resolve a waiting node. "all": wait until no input edge is pending, then run if every
        required field is fed by a live edge, else skip. "any": run as soon as every required
        field has one live edge (the first wins); skip once a required field cannot be fed."""
        if self.state[node_id] != NodeState.WAITING:
            return
        node = self.dag.nodes[node_id]
        edges = self.dag.in_edges[node_id]
        required = self.dag.required[node_id]
        if node.join == "all":
            # the edge checks of ``_edge_pending`` / ``_edge_live`` written out: this runs for
            # every node of every run
            state, labels = self.state, self._labels
            fed = set()
            for e in edges:
                src = e.source
                if src == INPUT_NODE:
                    fed.add(e.target_field)
                    continue
                s = state.get(src)
                if s not in TERMINAL:
                    return  # an input is still pending
                if s == NodeState.DONE and (e.when is None or e.when == labels.get(src)):
                    fed.add(e.target_field)
            ok = bool(fed) and fed.issuperset(required)  # every required field is fed
            if ok:
                self._make_ready(node_id)
            else:
                self._set_terminal(node_id, NodeState.SKIPPED)
            return
        waiting = False
        for f in required:
            field_edges = [e for e in edges if e.target_field == f]
            if any(self._edge_live(e) for e in field_edges):
                continue
            if not any(self._edge_pending(e) for e in field_edges):
                self._set_terminal(node_id, NodeState.SKIPPED)
                return
            waiting = True
        if not waiting:
            self._make_ready(node_id)

    def _make_ready(self, node_id: str) -> None:
        self.state[node_id] = NodeState.READY
        self._ready.append(node_id)

    def _set_terminal(self, node_id: str, state: NodeState) -> None:
        self.state[node_id] = state
        self._terminal += 1
        for e in self.dag.out_edges[node_id]:
            self._evaluate(e.target)
        if self._terminal == len(self.state) and not self.ended:
            self.status = "succeeded"
