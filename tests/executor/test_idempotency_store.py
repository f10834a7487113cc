"""The executor's idempotency store keeps final results as bytes (packed at the executor's
tick): a replay gets the result back (without its output copy), and the garbage collector never
rescans the store."""

from __future__ import annotations

import gc
from dataclasses import replace

from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.host.idempotency import pack_result, unpack_result
from control.executor.protocol import ItemResult, StepKey


def test_a_stored_result_comes_back_whole_without_its_output_and_is_not_tracked() -> None:
    result = ItemResult(StepKey("run-1", "embed"), "key-1", "rep-1", "cpu:0", True,
                        input_tokens=20, device_ms=3.25, batch_size=4, output=[0.5] * 8)  # fmt: skip
    stored = pack_result(result)
    assert not gc.is_tracked(stored)
    back = unpack_result(stored)
    assert back == replace(result, output=None)
    assert back.step == StepKey("run-1", "embed") and back.output is None


def test_a_failed_final_result_keeps_its_cause() -> None:
    failed = ItemResult(StepKey("run-2", "llm"), "key-2", "rep-1", "cpu:0", False,
                        error="prompt too long", cause="bad_input")  # fmt: skip
    assert unpack_result(pack_result(failed)) == failed


def test_a_result_is_packed_at_the_tick_and_answers_replays_before_and_after() -> None:
    ex = LocalExecutor(ExecutorConfig(idempotency_capacity=2))  # not started: no workers
    store = ex._store
    results = [ItemResult(StepKey(f"run-{i}", "embed"), f"key-{i}", "rep-1", "cpu:0", True,
                          output=[0.5] * 4) for i in range(3)]  # fmt: skip
    ex._dispatch.finish(None, results)
    assert store.keys() == ["key-1", "key-2"]  # the capacity holds, oldest out first
    assert unpack_result(store.stored("key-2")) == replace(results[2], output=None)  # unpacked
    assert store.replay("key-2") == replace(results[2], output=None, replayed=True)
    ex._inbound.tick()  # the executor's tick
    assert all(isinstance(store.stored(k), bytes) for k in store.keys())
    assert store._unpacked == []
    assert unpack_result(store.stored("key-2")) == replace(results[2], output=None)
    assert store.replay("key-2") == replace(results[2], output=None, replayed=True)
    assert store.keys() == ["key-1", "key-2"]  # packing keeps the order


def test_a_released_run_forgets_its_keys_and_other_runs_keep_theirs() -> None:
    ex = LocalExecutor(ExecutorConfig(idempotency_capacity=100))  # not started: no workers
    store = ex._store
    results = [ItemResult(StepKey(run, node), f"{run}/{node}/1", "rep-1", "cpu:0", True)
               for run in ("run-a", "run-b") for node in ("embed", "gen")]  # fmt: skip
    ex._dispatch.finish(None, results)
    ex._inbound.tick()  # packed: the release forgets packed results too
    ex.release_run("run-a")
    assert store.keys() == ["run-b/embed/1", "run-b/gen/1"]
    assert store.replay("run-a/embed/1") is None  # a later submit of it would run
    assert store.replay("run-b/gen/1") == replace(results[3], replayed=True)
    assert store.release_run("run-a") == 0 and store.release_run("run-b") == 2
    assert len(store) == 0


def test_the_run_index_is_bounded_like_the_keys() -> None:
    ex = LocalExecutor(ExecutorConfig(idempotency_capacity=3))
    ex._dispatch.finish(None, [ItemResult(StepKey(f"run-{i}", "embed"), f"k{i}", "rep-1",
                                          "cpu:0", True) for i in range(10)])  # fmt: skip
    assert len(ex._store) == 3 and len(ex._store._by_run) == 3
