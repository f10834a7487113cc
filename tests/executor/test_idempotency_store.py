"""The executor's idempotency store keeps final results as bytes (packed at the pump's tick): a
replay gets the result back (without its output copy), and the garbage collector never rescans
the store."""

from __future__ import annotations

import gc
from dataclasses import replace

from control.executor.base import ItemResult, StepKey
from control.executor.local import ExecutorConfig, LocalExecutor
from control.executor.pump import _store, _unstore


def test_a_stored_result_comes_back_whole_without_its_output_and_is_not_tracked() -> None:
    result = ItemResult(StepKey("run-1", "embed"), "key-1", "rep-1", "cpu:0", True,
                        input_tokens=20, device_ms=3.25, batch_size=4, output=[0.5] * 8)  # fmt: skip
    stored = _store(result)
    assert not gc.is_tracked(stored)
    back = _unstore(stored)
    assert back == replace(result, output=None)
    assert back.step == StepKey("run-1", "embed") and back.output is None


def test_a_failed_final_result_keeps_its_cause() -> None:
    failed = ItemResult(StepKey("run-2", "llm"), "key-2", "rep-1", "cpu:0", False,
                        error="prompt too long", cause="bad_input")  # fmt: skip
    assert _unstore(_store(failed)) == failed


def test_a_result_is_packed_at_the_pump_tick_and_answers_replays_before_and_after() -> None:
    ex = LocalExecutor(ExecutorConfig(idempotency_capacity=2))  # not started: no workers
    results = [ItemResult(StepKey(f"run-{i}", "embed"), f"key-{i}", "rep-1", "cpu:0", True,
                          output=[0.5] * 4) for i in range(3)]  # fmt: skip
    ex._finish(None, results)
    assert list(ex._done) == ["key-1", "key-2"]  # the capacity holds, oldest out first
    assert _unstore(ex._done["key-2"]) == replace(results[2], output=None)  # before packing
    ex._pack_done()  # the pump's tick
    assert all(isinstance(v, bytes) for v in ex._done.values()) and ex._unpacked == []
    assert _unstore(ex._done["key-2"]) == replace(results[2], output=None)
    assert list(ex._done) == ["key-1", "key-2"]  # packing keeps the order
