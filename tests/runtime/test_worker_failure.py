"""A worker killed mid-batch: the step is retried on the other device under the same
idempotency key, the run succeeds, usage is billed once, and the device comes back.

Synchronisation is on facts, never on elapsed time: the kill waits until the executor has
heard the worker START the slow step (its ``started`` message), so the step is certainly
running when the process dies. (This test once flaked under load: it slept 0.2 s and assumed
the step was running by then, and heartbeats came from the busy main thread, so a loaded core
could also make a healthy worker look hung.)"""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
import pytest_asyncio

from tests.runtime.conftest import make_runtime, run_request
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(model_cache):
    usage: list = []
    rt = make_runtime(model_cache)
    await rt.start(usage_sink=usage.append)
    yield rt, usage
    await rt.stop()


async def _until(predicate, what: str, timeout: float = 20.0):  # noqa: ANN001, ANN202
    return await until(predicate, what, timeout)


def _running_slow_step(rt) -> str | None:
    """The device whose worker has started the slow step's batch, or None yet."""
    batches = {b.batch_id for b in rt.snapshot().batches if b.model_key == "slow:1"}
    for status in rt.executor.heartbeat():
        if status.running_batch in batches:
            return status.device_id
    return None


async def test_killed_worker_mid_batch_retries_elsewhere_once(world):
    rt, usage = world
    req = run_request("slow-one", text="survive")
    handle = rt.submit_run(req)
    victim = await _until(lambda: _running_slow_step(rt), "the slow step to start")
    os.kill(rt.executor.worker_pid(victim), signal.SIGKILL)
    result = await asyncio.wait_for(handle.result(), 30)
    assert result.status == "succeeded", result
    mine = [u for u in usage if u.request_id == req.request_id]
    assert len(mine) == 1, mine  # billed once, for the attempt that ran to the end
    (record,) = mine
    assert record.attempt == 2 and record.device != victim
    assert record.idempotency_key == f"{req.request_id}/s"  # the key of attempt 1 too
    assert rt.snapshot().counters.get("StepRetried", 0) == 1


def _restored(rt) -> bool:
    snap = rt.snapshot()
    devices = {d.device_id: d for d in snap.devices}
    return all(d.up for d in devices.values()) and all(
        any(r.model_key == "slow:1" and r.device_ids == (dev,) for r in snap.replicas)
        for dev in devices
    )


async def test_restarted_worker_gets_its_replicas_back(world):
    rt, _ = world
    await _until(lambda: _restored(rt), "the restarted worker's replicas", timeout=60)
    result = await asyncio.wait_for(rt.submit_run(run_request("rag", query="fox")).result(), 30)
    assert result.status == "succeeded", result
