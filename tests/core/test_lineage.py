"""Lineage recovery in the core: an input lost with its worker is recomputed under a fresh key,
transitively; the consumer's retry is not counted; a recompute bound fails the run by name."""

from __future__ import annotations

import pytest

from control.core.dag import lineage
from control.core.dag.run import CompiledDag, DagRun, StepRef
from control.core.dag.spec import dag_from_dict
from tests.support.builders import RAG


def _run() -> DagRun:
    return DagRun("r1", CompiledDag(dag_from_dict(RAG)), "idem")


def _advance(run: DagRun, steps: list[StepRef], dev: str = "d0") -> list[StepRef]:
    for s in steps:
        assert run.on_step_done(s.key, dev, f"{dev}-rep")
    return run.take_ready()


def _at_llm(run: DagRun) -> StepRef:
    steps = run.take_ready()
    for _ in range(3):
        steps = _advance(run, steps)
    (llm,) = steps
    assert llm.node_id == "llm"
    return llm


def test_lost_input_reruns_its_producer_under_a_fresh_key() -> None:
    run = _run()
    llm = _at_llm(run)
    made = lineage.on_input_lost(run, llm.key, "input lost: 'r1/rerank'", 8, (("rerank", None),))
    (re,) = made
    assert re.node_id == "rerank" and re.recompute == 1 and re.attempt == 1001
    assert re.idempotency_key == "idem/rerank~r1" != "idem/rerank"
    assert re.key not in {llm.key} and llm.key not in run.live  # consumer parked
    assert run.take_ready() == [] and run.status == "running"
    assert run.on_step_done(re.key, "d1", "d1-rep")
    (again,) = run.take_ready()
    assert again.node_id == "llm" and again.attempt == 2 and again.spared == 1
    assert again.idempotency_key == llm.idempotency_key
    (ctx,) = [b for b in again.inputs if b.target_field == "context"]
    assert ctx.refs[0].device_id == "d1"  # reads where the recomputed output lives
    # the spared retry leaves the node's own retries (1) intact: one real failure still retries
    retry = run.on_step_failed(again.key, "oom")
    assert retry is not None and retry.attempt == 3
    assert run.on_step_failed(retry.key, "oom") is None and run.status == "failed"


def test_recovery_is_transitive_and_keys_never_repeat() -> None:
    run = _run()
    llm = _at_llm(run)
    (re,) = lineage.on_input_lost(run, llm.key, "input lost", 8, (("rerank", None),))
    # the recomputed rerank finds its own input (search) lost too
    (se,) = lineage.on_input_lost(run, re.key, "input lost", 8, (("search", None),))
    assert se.node_id == "search" and se.idempotency_key == "idem/search~r1"
    assert run.on_step_done(se.key, "d1", "x")
    (re2,) = run.take_ready()  # rerank's recomputation resumes (same generation, next attempt)
    assert re2.node_id == "rerank" and re2.recompute == 1 and re2.attempt == 1002
    assert re2.idempotency_key == "idem/rerank~r1"
    assert run.on_step_done(re2.key, "d1", "x")
    (llm2,) = run.take_ready()
    # a second loss of the same output: the next generation, a key not used before
    (re3,) = lineage.on_input_lost(run, llm2.key, "input lost", 8, (("rerank", None),))
    assert re3.idempotency_key == "idem/rerank~r2" and re3.attempt == 2001
    assert run.on_step_done(re3.key, "d0", "x")
    (llm3,) = run.take_ready()
    assert run.on_step_done(llm3.key, "d0", "x") and run.status == "succeeded"
    billed = ["idem/embed", "idem/search", "idem/rerank", "idem/search~r1", "idem/rerank~r1",
              "idem/rerank~r2", llm3.idempotency_key]  # fmt: skip
    assert len(set(billed)) == len(billed)  # one ledger entry per key: nothing billed twice
    assert run.outputs()["answer"][0].device_id == "d0"


def test_a_recomputation_keeps_its_nodes_retries() -> None:
    run = _run()
    llm = _at_llm(run)
    (re,) = lineage.on_input_lost(run, llm.key, "input lost", 8, (("rerank", None),))
    # rerank has no retries of its own: its recomputation failing for itself ends the run
    assert run.on_step_failed(re.key, "oom") is None
    assert run.status == "failed" and "'rerank'" in (run.error or "")


def test_unnamed_loss_recomputes_every_producer_once() -> None:
    run = _run()
    llm = _at_llm(run)
    made = lineage.on_input_lost(run, llm.key, "input unavailable: gone", 8)
    assert [s.node_id for s in made] == ["rerank"]  # the request input is not recomputable


def test_bound_exceeded_fails_the_run_naming_the_node() -> None:
    run = _run()
    llm = _at_llm(run)
    (re,) = lineage.on_input_lost(run, llm.key, "input lost", 1, (("rerank", None),))
    assert lineage.on_input_lost(run, re.key, "input lost", 1, (("search", None),)) == []
    assert run.status == "failed"
    assert "'rerank'" in (run.error or "") and "recompute limit (1)" in (run.error or "")
    with pytest.raises(ValueError):
        lineage.on_input_lost(run, "x", "input lost", -1)


def test_only_request_inputs_lost_is_an_ordinary_failure() -> None:
    run = _run()
    (embed,) = run.take_ready()
    # embed has no retries of its own: an ordinary failure ends the run, naming the node
    assert lineage.on_input_lost(run, embed.key, "input lost: query", 8) == []
    assert run.status == "failed" and "'embed' failed after 1 attempt" in (run.error or "")


def test_is_input_loss() -> None:
    assert lineage.is_input_loss("input lost: 'r/search'")
    assert lineage.is_input_loss("input unavailable: x")
    assert not lineage.is_input_loss("oom")
    assert not lineage.is_input_loss("input lost", "bad_input")
    assert not lineage.is_input_loss(None)
