"""A node's ``timeout_s`` bounds its latency, retries included, live (issue 24, item 8).

``slow:1`` has a replica on each CPU worker. The worker of ``cpu:0`` is stopped (SIGSTOP: a
replica that answers nothing, for less than its supervisor's hang judgement) while two runs of
a node with ``timeout_s`` 0.5 and one retry come in; one run lands on each replica. The run on
``cpu:0`` times out, and its retry goes at once to ``cpu:1`` under a fresh idempotency key: both
runs end well within the stop. When the worker is let go, the original's late result (or its
cancellation) is discarded and nothing more is billed: one ledger entry per run, from ``cpu:1``.

Before this, the retry kept the node's key and the executor, which runs a key once, made it
wait for the stopped original: the run took as long as the stop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
import pytest_asyncio

from control.core.dag.spec import dag_from_dict
from tests.runtime.conftest import WORKFLOWS, make_runtime, run_request
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIMEOUT_S = 0.5
STOP_S = 2.7  # under the executor's hang judgement (6 missed beats of 0.5 s)
BOUNDED = {
    "workflow": "bounded",
    "inputs": {"text": "text"},
    "nodes": [{"id": "s", "task": "classify", "model": "slow:1", "retries": 1,
               "timeout_s": TIMEOUT_S, "params": {"busy_ms": 50}}],
    "edges": [{"from": "input.text", "to": "s.text"}],
}  # fmt: skip


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(model_cache):
    usage: list = []
    rt = make_runtime(model_cache, WORKFLOWS + (dag_from_dict(BOUNDED),))
    await rt.start(usage_sink=usage.append)
    yield rt, usage
    await rt.stop()


async def test_a_timed_out_step_is_retried_at_once_on_the_other_replica_and_billed_once(world):
    rt, usage = world
    warm = await asyncio.wait_for(rt.submit_run(run_request("bounded", text="warm")).result(), 30)
    assert warm.ok, warm.error
    usage.clear()
    pid = rt.executor.worker_pid("cpu:0")
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        began = time.perf_counter()
        handles = [rt.submit_run(run_request("bounded", text=f"t{i}")) for i in range(2)]
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 30)
        took = time.perf_counter() - began
        assert [r.status for r in results] == ["succeeded"] * 2, [r.error for r in results]
        # bounded by the timeout (and one more short step), not by the stopped replica
        assert took < TIMEOUT_S + 1.5 < STOP_S, took
    finally:
        os.kill(pid, signal.SIGCONT)
    timed_out = [r for r in results if r.reissued]
    assert len(timed_out) == 1, [r.reissued for r in results]
    (note,) = timed_out[0].reissued
    assert note["cause"] == "timeout" and note["node"] == "s", note
    assert "timed out after 0.5 s" in note["reason"]
    # the original comes back (late, or cancelled) once the worker runs again: discarded
    await until(lambda: not rt.driver.completions.pending, "the stopped original to come back",
                20)  # fmt: skip
    billed = sorted((u.request_id, u.device) for u in usage)
    assert [b[0] for b in billed] == sorted(r.request_id for r in results), billed  # once each
    assert dict(billed)[timed_out[0].request_id] == "cpu:1", billed
    assert rt.executor.worker_pid("cpu:0") == pid  # the stopped worker was not killed
