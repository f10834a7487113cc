"""The executor's idempotency store keeps final results as bytes: a replay gets the result back
(without its output copy), and the garbage collector never rescans the store."""

from __future__ import annotations

import gc
from dataclasses import replace

from control.executor.base import ItemResult, StepKey
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
