"""A worker killed mid-batch: the step is retried on the other device under the same
idempotency key, the run succeeds, usage is billed once, and the device comes back."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
import pytest_asyncio

from tests.runtime.conftest import make_runtime, run_request

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(model_cache):
    usage: list = []
    rt = make_runtime(model_cache, usage)
    await rt.start()
    yield rt, usage
    await rt.stop()


async def _in_flight_device(rt, timeout: float = 10.0) -> str:
    replicas = {r.replica_id: r.device_ids[0] for r in rt.snapshot().replicas}
    for _ in range(int(timeout / 0.02)):
        batches = [b for b in rt.snapshot().batches if b.model_key == "slow:1"]
        if batches:
            return replicas[batches[0].replica_id]
        await asyncio.sleep(0.02)
    raise AssertionError("the slow step was never dispatched")


async def test_killed_worker_mid_batch_retries_elsewhere_once(world):
    rt, usage = world
    req = run_request("slow-one", text="survive")
    handle = rt.submit_run(req)
    victim = await _in_flight_device(rt)
    await asyncio.sleep(0.2)  # the worker is inside the 1.5 s step now
    os.kill(rt.executor.worker_pid(victim), signal.SIGKILL)
    result = await asyncio.wait_for(handle.result(), 30)
    assert result.status == "succeeded", result
    mine = [u for u in usage if u.request_id == req.request_id]
    assert len(mine) == 1, mine  # billed once, for the attempt that ran to the end
    (record,) = mine
    assert record.attempt == 2 and record.device != victim
    assert record.idempotency_key == f"{req.request_id}/s"  # the key of attempt 1 too
    assert rt.snapshot().counters.get("StepRetried", 0) == 1


async def test_restarted_worker_gets_its_replicas_back(world):
    rt, _ = world
    for _ in range(300):
        snap = rt.snapshot()
        devices = {d.device_id: d for d in snap.devices}
        if all(d.up for d in devices.values()) and all(
            any(r.model_key == "slow:1" and r.device_ids == (dev,) for r in snap.replicas)
            for dev in devices
        ):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"replicas not restored: {rt.snapshot().replicas}")
    result = await asyncio.wait_for(rt.submit_run(run_request("rag", query="fox")).result(), 30)
    assert result.status == "succeeded", result
