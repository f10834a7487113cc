"""Proactive lineage recovery: a device down recomputes at once the outputs only it held that a
consumer may still read (fresh keys, bounded), not when the consumer fails on fetch."""

from __future__ import annotations

import pytest

from control.core.actions import Dispatch, RunFinished
from control.core.context import CoreConfig
from control.core.dag import lineage
from control.core.dag.run import CompiledDag, DagRun, StepRef
from control.core.dag.spec import dag_from_dict
from control.core.events import DeviceDown
from control.core.types import Request
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, LLM, RAG, devices, latency, make_core
from tests.support.replay import Arrival, ReplayDriver, SimExecutor


def _run() -> DagRun:
    return DagRun("r1", CompiledDag(dag_from_dict(RAG)), "idem")


def _done(run: DagRun, steps: list[StepRef], dev: str) -> list[StepRef]:
    for s in steps:
        assert run.on_step_done(s.key, dev, f"{dev}-rep")
    return run.take_ready()


def test_down_device_recomputes_only_what_a_pending_consumer_reads() -> None:
    run = _run()
    (embed,) = run.take_ready()
    (search,) = _done(run, [embed], "d0")
    (rerank,) = _done(run, [search], "d1")  # rerank is running and reads search on d1
    assert lineage.on_device_down(run, "d0", 8) == []  # embed's reader (search) is done
    (re,) = lineage.on_device_down(run, "d1", 8)
    assert re.node_id == "search" and re.recompute == 1 and re.attempt == 1001
    assert re.idempotency_key == "idem/search~r1"
    assert lineage.on_device_down(run, "d1", 8) == []  # already being recomputed
    # the consumer fails on fetch meanwhile: it parks, nothing recomputed twice
    assert lineage.on_input_lost(run, rerank.key, "input lost", 8, (("search", None),)) == []
    assert run.on_step_done(re.key, "d2", "d2-rep")
    (again,) = run.take_ready()
    assert again.node_id == "rerank" and again.spared == 1
    assert {r.device_id for b in again.inputs for r in b.refs if r.node_id == "search"} == {"d2"}
    (llm,) = _done(run, [again], "d2")
    assert _done(run, [llm], "d2") == [] and run.status == "succeeded"
    assert run.lineage.recomputes == 1


def test_recovery_on_down_is_transitive() -> None:
    run = _run()
    (embed,) = run.take_ready()
    (search,) = _done(run, [embed], "d1")
    (rerank,) = _done(run, [search], "d1")
    (llm,) = _done(run, [rerank], "d1")  # llm queued, reads rerank; rerank read search: all on d1
    made = lineage.on_device_down(run, "d1", 8)
    # rerank is needed by llm; search only by rerank's recomputation; embed by search's
    assert [s.node_id for s in made] == ["rerank", "search", "embed"]
    assert {s.idempotency_key for s in made} == {"idem/rerank~r1", "idem/search~r1",
                                                 "idem/embed~r1"}  # fmt: skip
    assert run.lineage.recomputes == 3 and llm.key in run.live


def test_down_recomputes_are_bounded() -> None:
    run = _run()
    (embed,) = run.take_ready()
    (search,) = _done(run, [embed], "d1")
    (rerank,) = _done(run, [search], "d1")
    _done(run, [rerank], "d1")
    assert [s.node_id for s in lineage.on_device_down(run, "d1", 2)] == ["rerank", "search"]
    assert lineage.on_device_down(run, "d9", 0) == []
    with pytest.raises(ValueError):
        lineage.on_device_down(run, "d1", -1)


def test_nothing_recomputed_for_an_ended_run_or_a_final_output() -> None:
    run = _run()
    steps = run.take_ready()
    for _ in range(4):
        steps = _done(run, steps, "d1")
    assert run.status == "succeeded"
    assert lineage.on_device_down(run, "d1", 8) == []


CHAIN = {
    "workflow": "chain",
    "inputs": {"prompt": "text"},
    "outputs": {"vector": "embed.embedding"},
    "nodes": [
        {"id": "gen", "task": "generate", "model": LLM.key},
        {"id": "embed", "task": "embed", "model": EMBED.key},
    ],
    "edges": [
        {"from": "input.prompt", "to": "gen.prompt"},
        {"from": "gen.text", "to": "embed.text"},
    ],
}


def test_engine_recomputes_on_device_down_before_any_fetch_fails() -> None:
    """``gen`` runs on d000 only; ``embed`` (on d001) is slow to come; d000 goes down between:
    the core dispatches ``gen``'s recomputation (fresh key) on the DeviceDown itself."""
    devs = devices(2)
    core = make_core(FcfsTenancy(), devs=devs, workflows=[CHAIN], config=CoreConfig(),
                     replicas=[(LLM.key, "d000"), (EMBED.key, "d001")])  # fmt: skip
    executor = SimExecutor(latency(), {d.device_id: d.accelerator for d in devs})
    driver: ReplayDriver
    downed: list[float] = []

    def kill_after_gen(now: float, plan) -> None:  # noqa: ANN001
        for d in plan.of_type(Dispatch):
            if d.items[0].node_id == "embed" and not downed:
                downed.append(now)
                driver.schedule(now + 1e-6, DeviceDown("d000", "worker killed"))

    driver = ReplayDriver(core, executor, on_step=kill_after_gen)
    log = driver.run([Arrival(0.0, Request("q1", "t1", "chain", prompt_tokens=16))])
    keys = [i.idempotency_key for _, a in log if isinstance(a, Dispatch) for i in a.items]
    assert any(k.endswith("/gen~r1") for k in keys), keys
    (fin,) = [a for _, a in log if isinstance(a, RunFinished)]
    assert fin.status == "succeeded"


def test_an_index_tool_output_is_held_where_it_ran_and_recovered_on_down() -> None:
    """The RAG case of the issue (``input lost: '<run>/search.documents'``): ``search`` runs on
    an index replica the runtime picks (the core's dispatch has no replica), and its result says
    where (``held_on``); when that device goes down, ``search`` (and ``embed``, which its
    recomputation reads there) is recomputed at once."""
    from control.core.actions import StepRetried
    from control.core.types import BatchResult, StepResult
    from tests.support.builders import RERANK

    core = make_core(FcfsTenancy(), devs=devices(2), workflows=[RAG],
                     replicas=[(EMBED.key, "d000"), (RERANK.key, "d001"), (LLM.key, "d001")])  # fmt: skip
    core.submit(Request("q1", "t1", "rag", prompt_tokens=8), 0.0)
    now, seen, down = 0.0, [], False
    for _ in range(400):
        now += 0.005
        plan = core.step(now)
        seen.extend(plan.of_type(StepRetried))
        for d in plan.of_type(Dispatch):
            node = d.items[0].node_id
            if node == "rerank" and not down:  # search done; rerank's fetch not yet made
                down = True
                core.ingest(DeviceDown("d000", "worker killed"), now)
                continue
            held = ("d000", "idx-rep") if d.replica_id is None else None
            done = tuple(StepResult(i.key, held_on=held) for i in d.items)
            core.complete(BatchResult(d.batch_id, 10, done), now + 0.001)
        if down and len(seen) >= 2:
            break
    assert down
    keys = {s.idempotency_key.rsplit("/", 1)[1] for s in seen}
    assert {"search~r1", "embed~r1"} <= keys, keys


def test_a_consumer_bound_before_the_recompute_ended_is_retried_not_recomputed_again() -> None:
    run = _run()
    (embed,) = run.take_ready()
    (search,) = _done(run, [embed], "d0")
    (rerank,) = _done(run, [search], "d1")  # bound to search on d1
    (re,) = lineage.on_device_down(run, "d1", 8)
    assert run.on_step_done(re.key, "d2", "d2-rep")  # search lives on d2 now
    # the attempt bound to d1 fails on fetch after that: retried at once, nothing recomputed
    (again,) = lineage.on_input_lost(run, rerank.key, "input lost", 8, (("search", None),))
    assert again.node_id == "rerank" and again.spared == 1 and again.recompute == 0
    assert {r.device_id for b in again.inputs for r in b.refs if r.node_id == "search"} == {"d2"}
    assert run.lineage.recomputes == 1
