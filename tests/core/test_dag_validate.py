"""Workflow validation: every problem at once, with locations; cycles never pass."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control.core.dag.spec import (
    DagSpec,
    EdgeSpec,
    NodeSpec,
    SpecFormatError,
    dag_from_dict,
    linear_pipeline,
)
from control.core.dag.validate import validate
from tests.support.builders import RAG

KNOWN = {"minilm:1": "embed", "rerank:1": "rerank", "smollm2:1": "generate", "cls:1": "classify"}


def codes(raw: dict) -> list[str]:
    return sorted(p.code for p in validate(dag_from_dict(raw), KNOWN))


def mutate(fn) -> dict:  # noqa: ANN001
    raw = copy.deepcopy(RAG)
    fn(raw)
    return raw


def test_rag_is_valid() -> None:
    assert validate(dag_from_dict(RAG), KNOWN) == ()


CASES = [
    ("unknown model", lambda r: r["nodes"][0].update(model="nope:9"), ["unknown_model"]),
    (
        "unknown tool",
        lambda r: r["nodes"][1].update(tool="grep"),
        ["dangling_edge", "dangling_edge", "unknown_tool"],
    ),
    ("task mismatch", lambda r: r["nodes"][0].update(model="cls:1"), ["model_task_mismatch"]),
    (
        "duplicate id",
        lambda r: r["nodes"].append({"id": "embed", "task": "embed", "model": "minilm:1"}),
        ["duplicate_id"],
    ),
    (
        "dangling edge",
        lambda r: r["edges"].append({"from": "ghost.text", "to": "llm.prompt"}),
        ["dangling_edge", "doubly_fed"],
    ),
    ("unfed input", lambda r: r["edges"].pop(3), ["unfed_input"]),
    (
        "doubly fed",
        lambda r: r["edges"].append({"from": "input.query", "to": "embed.text"}),
        ["doubly_fed"],
    ),
    (
        "type mismatch",
        lambda r: r["edges"].append({"from": "embed.embedding", "to": "llm.context"}),
        ["doubly_fed", "type_mismatch"],
    ),
    ("bad when", lambda r: r["edges"][0].update(when="x"), ["bad_when"]),
    ("bad output", lambda r: r.update(outputs={"answer": "llm.nothing"}), ["bad_output"]),
    ("bad retries", lambda r: r["nodes"][3].update(retries=-1), ["bad_retries"]),
    (
        "rerank scores as output",
        lambda r: r.update(outputs={"answer": "llm.text", "scores": "rerank.scores"}),
        [],
    ),
    (
        "rerank order as output",
        lambda r: r.update(outputs={"order": "rerank.order", "docs": "rerank.documents"}),
        [],
    ),
    (
        "rerank scores are not documents",
        lambda r: r["edges"].__setitem__(4, {"from": "rerank.scores", "to": "llm.context"}),
        ["type_mismatch"],
    ),
    (
        "rerank has no logits port",
        lambda r: r.update(outputs={"x": "rerank.logits"}),
        ["bad_output"],
    ),
]


@pytest.mark.parametrize(("name", "change", "expected"), CASES, ids=[c[0] for c in CASES])
def test_each_problem_is_reported(name: str, change, expected: list[str]) -> None:  # noqa: ANN001
    assert codes(mutate(change)) == sorted(expected)


def test_all_problems_at_once_with_locations() -> None:
    def many(r: dict) -> None:
        r["nodes"][0]["model"] = "nope:9"
        r["nodes"][3]["retries"] = -2
        r["edges"].append(
            {"from": "llm.text", "to": "embed.text"}
        )  # closes a cycle and doubly feeds

    problems = validate(dag_from_dict(mutate(many)), KNOWN)
    found = {p.code for p in problems}
    assert {"unknown_model", "bad_retries", "cycle", "doubly_fed"} <= found
    cycle = next(p for p in problems if p.code == "cycle")
    for node in ("embed", "search", "rerank", "llm"):
        assert node in cycle.message
    assert next(p for p in problems if p.code == "unknown_model").location == "nodes[embed]"


def test_unreachable_node_named() -> None:
    raw = mutate(
        lambda r: (
            r["nodes"].append({"id": "orphan", "task": "classify", "model": "cls:1"}),
            r["edges"].append({"from": "llm.text", "to": "orphan.text"}),
        )
    )
    assert codes(raw) == []
    spec = DagSpec(
        "w",
        (
            NodeSpec("a", task="classify", model="cls:1"),
            NodeSpec("b", task="classify", model="cls:1"),
        ),
        (EdgeSpec("a", "label", "b", "text"), EdgeSpec("b", "label", "a", "text")),
    )
    problems = validate(spec, KNOWN)
    assert {p.code for p in problems} >= {"cycle", "unreachable", "type_mismatch"}
    assert {p.location for p in problems if p.code == "unreachable"} == {"nodes[a]", "nodes[b]"}


def test_malformed_dict_raises_naming_the_place() -> None:
    with pytest.raises(SpecFormatError, match=r"edges\[0\].from"):
        dag_from_dict({"workflow": "w", "nodes": [], "edges": [{"from": "nodot", "to": "a.b"}]})


def test_linear_pipeline_is_valid() -> None:
    spec = linear_pipeline("p", [("e", "cls:1", "classify", "text")])
    assert validate(spec, KNOWN) == ()


@st.composite
def graphs(draw):  # noqa: ANN001, ANN201
    n = draw(st.integers(2, 7))
    names = [f"n{i}" for i in range(n)]
    pairs = draw(st.lists(st.tuples(st.sampled_from(names), st.sampled_from(names)), max_size=14))
    return names, pairs


def _has_cycle(names: list[str], pairs: list[tuple[str, str]]) -> bool:
    succ = {n: {b for a, b in pairs if a == n} for n in names}
    state: dict[str, int] = {}

    def visit(v: str) -> bool:
        state[v] = 1
        for w in succ[v]:
            if state.get(w) == 1 or (w not in state and visit(w)):
                return True
        state[v] = 2
        return False

    return any(visit(n) for n in names if n not in state)


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_validation_never_accepts_a_cycle(graph) -> None:  # noqa: ANN001
    names, pairs = graph
    nodes = tuple(NodeSpec(n, tool="router", join="any") for n in names)
    edges = [EdgeSpec("input", "x", names[0], "value")]
    edges += [
        EdgeSpec(a, "value", b, "value", when=f"{a}-{b}-{i}") for i, (a, b) in enumerate(pairs)
    ]
    spec = DagSpec("g", nodes, tuple(edges), {"x": "text"})
    problems = validate(spec, KNOWN)
    has_cycle = _has_cycle(names, pairs)
    assert any(p.code == "cycle" for p in problems) == has_cycle
    if has_cycle:
        assert problems  # never accepted


def test_rerank_pipeline_still_chains_documents() -> None:
    """Adding ports must not change what a rerank stage hands to the next stage."""
    spec = linear_pipeline(
        "p", [("r", "rerank:1", "rerank", "documents"), ("g", "smollm2:1", "generate", "context")]
    )
    assert spec.edges[1].source_field == "documents"
