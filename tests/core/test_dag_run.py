"""DagRun: layers, ready nodes, routers, joins, map nodes, retries, failure, critical path."""

from __future__ import annotations

import copy

from control.core.dag.run import CompiledDag, DagRun, NodeState
from control.core.dag.spec import dag_from_dict
from tests.support.builders import RAG

ROUTED = {
    "workflow": "routed",
    "inputs": {"q": "text"},
    "outputs": {"answer": "final.label"},
    "nodes": [
        {"id": "route", "tool": "router"},
        {"id": "fast", "task": "generate", "model": "smollm2:1"},
        {"id": "embed", "task": "embed", "model": "minilm:1"},
        {"id": "search", "tool": "vector_search"},
        {"id": "slow", "task": "generate", "model": "smollm2:1"},
        {"id": "final", "task": "classify", "model": "cls:1", "join": "any"},
    ],
    "edges": [
        {"from": "input.q", "to": "route.value"},
        {"from": "route.value", "to": "fast.prompt", "when": "short"},
        {"from": "route.value", "to": "embed.text", "when": "long"},
        {"from": "embed.embedding", "to": "search.embedding"},
        {"from": "route.value", "to": "slow.prompt", "when": "long"},
        {"from": "search.documents", "to": "slow.context"},
        {"from": "fast.text", "to": "final.text"},
        {"from": "slow.text", "to": "final.text"},
    ],
}

MAP = {
    "workflow": "video",
    "inputs": {"doc": "text"},
    "outputs": {"summary": "sum.text"},
    "nodes": [
        {"id": "split", "tool": "segment"},
        {"id": "sum", "task": "generate", "model": "smollm2:1", "map_over": "prompt"},
    ],
    "edges": [
        {"from": "input.doc", "to": "split.text"},
        {"from": "split.segments", "to": "sum.prompt"},
    ],
}


def run_of(raw: dict) -> DagRun:
    return DagRun("r1", CompiledDag(dag_from_dict(raw)), "idem")


def finish_all(run: DagRun, label: str | None = None, items: int | None = None) -> list[str]:
    """Complete every step as it becomes ready; returns node ids in dispatch order."""
    order = []
    steps = run.take_ready()
    while steps:
        nxt = []
        for s in steps:
            order.append(s.node_id)
            run.on_step_done(s.key, "d0", "rep0", label, items)
            nxt += run.take_ready()
        steps = nxt
    return order


def test_layers_and_linear_progress() -> None:
    run = run_of(RAG)
    assert run.dag.layers == (("embed",), ("search",), ("rerank",), ("llm",))
    assert finish_all(run) == ["embed", "search", "rerank", "llm"]
    assert run.status == "succeeded"
    (ref,) = run.outputs()["answer"]
    assert (ref.node_id, ref.field, ref.device_id, ref.replica_id) == ("llm", "text", "d0", "rep0")


def test_inputs_say_where_data_lives() -> None:
    run = run_of(RAG)
    (embed,) = run.take_ready()
    run.on_step_done(embed.key, "dev7", "rep3")
    (search,) = run.take_ready()
    (binding,) = search.inputs
    assert binding.target_field == "embedding"
    assert [(r.node_id, r.field, r.device_id, r.replica_id) for r in binding.refs] == [
        ("embed", "embedding", "dev7", "rep3")
    ]


def test_router_skips_the_unselected_branch_and_any_join_fires() -> None:
    run = run_of(ROUTED)
    order = finish_all(run, label="short")
    assert order == ["route", "fast", "final"]
    for node in ("embed", "search", "slow"):
        assert run.state[node] == NodeState.SKIPPED
    assert run.status == "succeeded"


def test_other_label_runs_the_other_branch() -> None:
    run = run_of(ROUTED)
    order = finish_all(run, label="long")
    assert order == ["route", "embed", "search", "slow", "final"]
    assert run.state["fast"] == NodeState.SKIPPED


def test_map_node_splits_and_merges_in_order() -> None:
    run = run_of(MAP)
    (split,) = run.take_ready()
    run.on_step_done(split.key, None, None, item_count=3)
    chunks = run.take_ready()
    assert [c.chunk for c in chunks] == [0, 1, 2]
    assert [c.inputs[0].refs[0].chunk for c in chunks] == [0, 1, 2]
    assert len({c.idempotency_key for c in chunks}) == 3
    for c, dev in zip(reversed(chunks), ("dC", "dB", "dA"), strict=True):
        run.on_step_done(c.key, dev, "rep")
    assert run.status == "succeeded"
    merged = run.outputs()["summary"]
    assert [(r.chunk, r.device_id) for r in merged] == [(0, "dA"), (1, "dB"), (2, "dC")]


def test_retry_keeps_idempotency_key_then_failure_propagates() -> None:
    raw = copy.deepcopy(RAG)
    run = run_of(raw)
    steps = run.take_ready()
    for _ in range(3):
        for s in steps:
            run.on_step_done(s.key, "d", "r")
        steps = run.take_ready()
    (llm,) = steps
    retry = run.on_step_failed(llm.key, "oom")
    assert retry is not None and retry.attempt == 2 and retry.idempotency_key == llm.idempotency_key
    assert retry.key != llm.key
    assert run.on_step_failed(retry.key, "oom again") is None
    assert run.status == "failed" and "oom again" in (run.error or "")
    assert run.on_step_done(retry.key, "d", "r") is False  # stale after failure


def test_stale_completion_is_ignored() -> None:
    run = run_of(RAG)
    (embed,) = run.take_ready()
    assert run.on_step_done(embed.key, "d", "r") is True
    assert run.on_step_done(embed.key, "d", "r") is False


def test_critical_path_uses_estimates() -> None:
    dag = CompiledDag(dag_from_dict(ROUTED))
    cost = {"route": 1, "fast": 500, "embed": 5, "search": 10, "slow": 400, "final": 7}
    path, total = dag.critical_path(lambda n: cost[n.node_id])
    assert path == ("route", "fast", "final") and total == 508
    cost["slow"] = 600
    assert dag.critical_path(lambda n: cost[n.node_id]) == (
        ("route", "embed", "search", "slow", "final"),
        623,
    )
