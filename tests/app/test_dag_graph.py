"""The DAG editor's pure parts: a spec as canvas graph and back, panel edits, version diffs
and templates (no Streamlit, no HTTP)."""

from __future__ import annotations

import copy

import pytest

from app import dag_diff, dag_edit, dag_graph, workflow_templates
from app.dag_edit import DraftError
from app.dag_graph import INPUT, WORKFLOW

SPEC = workflow_templates.from_template("RAG", "rag")


def test_the_graph_has_the_input_box_one_box_per_node_and_one_arrow_per_pair() -> None:
    nodes, edges = dag_graph.graph_of(SPEC, {"search": ["bad index"]})
    assert [n.id for n in nodes] == [INPUT, "embed", "search", "rerank", "answer"]
    assert next(n for n in nodes if n.id == "search").problems == ("bad index",)
    assert next(n for n in nodes if n.id == "embed").model == "minilm-embed:1"
    pairs = [(e.source, e.target) for e in edges]
    assert len(pairs) == len(set(pairs)) == len(dag_graph.pairs_of(SPEC))
    assert next(e for e in edges if e.target == "search").label == "embedding→embedding"


def test_one_arrow_carries_every_field_between_a_pair_and_the_router_label() -> None:
    spec = {"nodes": [{"id": "a", "tool": "router"}, {"id": "b", "task": "rerank"}],
            "edges": [{"from": "a.value", "to": "b.query", "when": "x"},
                      {"from": "a.label", "to": "b.documents"}]}  # fmt: skip
    _, edges = dag_graph.graph_of(spec)
    assert [e.label for e in edges] == ["value→query [when x], label→documents"]


def test_the_canvas_unchanged_gives_the_spec_back() -> None:
    nodes, edges = dag_graph.graph_of(SPEC)
    back = dag_graph.apply_canvas(
        SPEC, [n.id for n in nodes], [(e.source, e.target) for e in edges]
    )
    assert back == SPEC


def test_a_node_deleted_on_the_canvas_takes_its_edges_along() -> None:
    ids = ["input", "embed", "search", "answer"]
    back = dag_graph.apply_canvas(SPEC, ids, dag_graph.pairs_of(SPEC))
    assert [n["id"] for n in back["nodes"]] == ["embed", "search", "answer"]
    assert all("rerank" not in e["from"] + e["to"] for e in back["edges"])
    assert SPEC["nodes"][2]["id"] == "rerank"  # the input is left alone


def test_a_drawn_arrow_becomes_an_edge_with_guessed_fields_and_an_erased_one_goes() -> None:
    ids = [INPUT] + dag_edit.node_ids(SPEC)
    pairs = dag_graph.pairs_of(SPEC) - {("rerank", "answer")} | {("search", "answer")}
    back = dag_graph.apply_canvas(SPEC, ids, pairs)
    assert {"from": "rerank.documents", "to": "answer.context"} not in back["edges"]
    # answer.prompt is fed by input.query already, so the new arrow feeds context
    assert back["edges"][-1] == {"from": "search.documents", "to": "answer.context"}


def test_arrows_into_input_onto_themselves_or_to_unknown_nodes_are_ignored() -> None:
    ids = [INPUT] + dag_edit.node_ids(SPEC)
    pairs = dag_graph.pairs_of(SPEC) | {("embed", INPUT), ("embed", "embed"), ("ghost", "embed")}
    assert dag_graph.apply_canvas(SPEC, ids, pairs) == SPEC


def test_an_arrow_from_input_carries_the_first_workflow_input() -> None:
    assert dag_graph.guess_edge(SPEC, INPUT, "embed") == {"from": "input.query", "to": "embed.text"}


def test_problems_go_to_the_node_they_name_or_the_node_an_edge_feeds() -> None:
    found = dag_graph.problems_on_nodes(SPEC, [
        {"location": "nodes[search].params", "message": "unknown index"},
        {"location": "edges[1].to", "message": "type mismatch"},
        {"location": "outputs.answer", "message": "node 'answer' has no field 'x'"},
        {"location": "spec", "message": "a cycle"},
    ])  # fmt: skip
    assert found["search"] == ["nodes[search].params: unknown index", "edges[1].to: type mismatch"]
    assert found["answer"] == ["outputs.answer: node 'answer' has no field 'x'"]
    assert found[WORKFLOW] == ["spec: a cycle"]


def test_adding_a_node_refuses_bad_or_taken_ids_and_keeps_the_spec() -> None:
    before = copy.deepcopy(SPEC)
    spec = dag_edit.add_node(SPEC, "check", "classify")
    assert spec["nodes"][-1] == {"id": "check", "task": "classify"}
    assert dag_edit.add_node(SPEC, "look", "vector_search")["nodes"][-1]["tool"] == "vector_search"
    for bad in ("embed", "input", "", "1st", "a b"):
        with pytest.raises(DraftError) as err:
            dag_edit.add_node(SPEC, bad, "embed")
        assert err.value.field == "id"
    assert SPEC == before


def test_node_updates_switch_task_and_tool_and_drop_blank_keys() -> None:
    spec = dag_edit.update_node(
        SPEC, "embed", {"retries": None, "timeout_s": 5, "map_over": "text"}
    )
    assert spec["nodes"][0] == {"id": "embed", "task": "embed", "model": "minilm-embed:1",
                                "timeout_s": 5, "map_over": "text"}  # fmt: skip
    tool = dag_edit.update_node(SPEC, "embed", {"kind": "segment"})["nodes"][0]
    assert tool == {"id": "embed", "tool": "segment", "timeout_s": 10, "retries": 1}
    with pytest.raises(DraftError):
        dag_edit.update_node(SPEC, "ghost", {"retries": 1})


def test_params_must_be_a_mapping() -> None:
    assert dag_edit.parse_params('{"top_k": 3}') == {"top_k": 3}
    assert dag_edit.parse_params("top_k: 3") == {"top_k": 3}
    assert dag_edit.parse_params("  ") == {}
    for bad in ("[1, 2]", "{unclosed", "7"):
        with pytest.raises(DraftError) as err:
            dag_edit.parse_params(bad)
        assert err.value.field == "params"


def test_dependencies_and_when_rewrite_the_edges_into_a_node() -> None:
    spec = dag_edit.set_dependencies(SPEC, "answer", [INPUT, "search"])
    into = [e for e in spec["edges"] if e["to"].startswith("answer.")]
    assert into == [{"from": "input.query", "to": "answer.prompt"},
                    {"from": "search.documents", "to": "answer.context"}]  # fmt: skip
    assert dag_edit.incoming(spec, "answer") == [INPUT, "search"]
    labelled = dag_edit.set_when(spec, "answer", "lookup")
    assert all(
        e.get("when") == "lookup" for e in labelled["edges"] if e["to"].startswith("answer.")
    )
    assert "when" not in str(dag_edit.set_when(labelled, "answer", "")["edges"])
    with pytest.raises(DraftError):
        dag_edit.set_dependencies(SPEC, "answer", ["ghost"])


def test_removing_a_node_drops_its_edges_and_the_outputs_it_fed() -> None:
    spec = dag_edit.remove_node(SPEC, "rerank")
    assert "rerank" not in dag_edit.node_ids(spec)
    assert spec["outputs"] == {"answer": "answer.text"}


def test_the_diff_lists_nodes_and_edges_added_removed_and_changed() -> None:
    new = dag_edit.update_node(dag_edit.remove_node(SPEC, "rerank"), "answer", {"retries": 3})
    new = dag_edit.add_node(new, "check", "classify")
    rows = dag_diff.diff_specs(SPEC, new)
    summary = [(r["part"], r["name"], r["change"]) for r in rows]
    assert summary[:3] == [("node", "check", "added"), ("node", "rerank", "removed"),
                           ("node", "answer", "changed")]  # fmt: skip
    assert rows[2]["detail"] == "retries: None → 3"
    assert ("edge", "rerank.documents → answer.context", "removed") in summary
    assert ("outputs", "outputs", "changed") in summary
    assert dag_diff.diff_specs(SPEC, copy.deepcopy(SPEC)) == []


@pytest.mark.parametrize("template", list(workflow_templates.TEMPLATES))
def test_templates_are_fresh_named_copies_drawn_without_loose_arrows(template: str) -> None:
    spec = workflow_templates.from_template(template, "x")
    assert spec["workflow"] == "x"
    spec["nodes"].append({"id": "mutated"})
    assert "mutated" not in str(workflow_templates.TEMPLATES[template])
    ids = {INPUT} | set(dag_edit.node_ids(spec))
    assert all(s in ids and t in ids for s, t in dag_graph.pairs_of(spec))
