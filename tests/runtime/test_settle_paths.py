"""Items the actuator fails itself, before the executor sees them: a vector search whose index
no replica serves, an input that cannot be resolved, a host tool refusing its input.

Each such step must fail at once with the reason, and its run end with it: the failure goes to
the core as the item's result (``Dispatcher._fail_item``). These paths once raised inside the
actuator (a method of the same name for run ends had replaced the one for items), the error was
swallowed, and the step hung until its timeout (``timeout_s`` below: the runs would have ended
``timed_out`` after it instead of ``failed`` at once).
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from control.core.dag.spec import dag_from_dict
from tests.runtime.conftest import WORKFLOWS, make_runtime, run_request

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: Long enough that a hung step cannot pass for a failed one within the test's wait.
TIMEOUT_S = 30.0
WAIT_S = 10.0

MISSING_INDEX = {
    "workflow": "missing-index",
    "inputs": {"text": "text"},
    "outputs": {"documents": "search.documents"},
    "nodes": [
        {"id": "embed", "task": "embed", "model": "embed:1", "timeout_s": TIMEOUT_S},
        {"id": "search", "tool": "vector_search", "timeout_s": TIMEOUT_S,
         "params": {"index": "no-such-index", "top_k": 2}},
    ],
    "edges": [
        {"from": "input.text", "to": "embed.text"},
        {"from": "embed.embedding", "to": "search.embedding"},
    ],
}  # fmt: skip
EMBED = {
    "workflow": "embed-strict",
    "inputs": {"text": "text"},
    "outputs": {"vector": "e.embedding"},
    "nodes": [{"id": "e", "task": "embed", "model": "embed:1", "timeout_s": TIMEOUT_S}],
    "edges": [{"from": "input.text", "to": "e.text"}],
}
SEGMENT = {
    "workflow": "segment-only",
    "inputs": {"text": "text"},
    "outputs": {"segments": "seg.segments"},
    "nodes": [{"id": "seg", "tool": "segment", "timeout_s": TIMEOUT_S}],
    "edges": [{"from": "input.text", "to": "seg.text"}],
}
EXTRA = tuple(dag_from_dict(w) for w in (MISSING_INDEX, EMBED, SEGMENT))


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def runtime(model_cache):
    rt = make_runtime(model_cache, workflows=WORKFLOWS + EXTRA)
    await rt.start()
    yield rt
    await rt.stop()


async def _ends(rt, workflow: str, **payload):  # noqa: ANN001, ANN202
    return await asyncio.wait_for(rt.submit_run(run_request(workflow, **payload)).result(), WAIT_S)


async def test_a_search_of_an_index_no_replica_serves_fails_at_once(runtime):
    result = await _ends(runtime, "missing-index", text="where is Paris?")
    assert result.status == "failed", result
    assert "no vector_search replica serves 'no-such-index'" in (result.error or "")


async def test_an_input_missing_from_the_payload_fails_at_once(runtime):
    result = await _ends(runtime, "embed-strict")  # no "text"
    assert result.status == "failed", result
    assert "input unavailable" in (result.error or "")


async def test_a_host_tool_refusing_its_input_fails_at_once(runtime):
    result = await _ends(runtime, "segment-only", text=12345)
    assert result.status == "failed", result
    assert "input 'text' has type int, expected str" in (result.error or "")


async def test_the_runtime_still_serves_after_those_failures(runtime):
    result = await _ends(runtime, "segment-only", text="One. Two.")
    assert result.status == "succeeded", result
    assert result.outputs["segments"] == ["One. Two."]
