"""A host tool refusing its input fails the item as ``bad_input`` (issue 22, item 2).

``ToolInputError`` is about the caller's input, never the host: the step must fail at once
and finally (its ``retries`` are not spent on it: a retry cannot help), and the run end with
``fault="bad_input"`` naming the workflow input to blame, which the API answers as a 422. It
used to be an ordinary step failure, retried and answered 502.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import pytest_asyncio

from control.core.dag.spec import dag_from_dict
from tests.runtime.conftest import WORKFLOWS, make_runtime, run_request

pytestmark = pytest.mark.asyncio(loop_scope="module")

SEGMENT = {
    "workflow": "segment-retried",
    "inputs": {"text": "text"},
    "outputs": {"segments": "seg.segments"},
    # retries with a long timeout: a retried step would take far longer than the bound below
    "nodes": [{"id": "seg", "tool": "segment", "retries": 3, "timeout_s": 30.0}],
    "edges": [{"from": "input.text", "to": "seg.text"}],
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runtime(model_cache):
    rt = make_runtime(model_cache, workflows=(*WORKFLOWS, dag_from_dict(SEGMENT)))
    await rt.start()
    yield rt
    await rt.stop()


async def test_a_tool_input_refusal_is_a_final_bad_input_naming_the_field(runtime):
    started = time.monotonic()
    handle = runtime.submit_run(run_request("segment-retried", text=12345))
    result = await asyncio.wait_for(handle.result(), 10.0)
    assert result.status == "failed", result
    assert result.fault == "bad_input" and result.field == "inputs.text", result
    assert "expected str" in (result.error or "")
    assert time.monotonic() - started < 5.0


async def test_a_good_input_still_runs(runtime):
    handle = runtime.submit_run(run_request("segment-retried", text="One. Two."))
    result = await asyncio.wait_for(handle.result(), 10.0)
    assert result.status == "succeeded" and result.outputs["segments"] == ["One. Two."]
