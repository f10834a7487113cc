"""The live driver with the real executor: workflows end to end, concurrency, batching,
wake-ups, streaming, metrics."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
from prometheus_client import generate_latest

from control import clock
from tests.runtime.conftest import DOCS, MAX_DELAY_S, make_runtime, run_request

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(model_cache):
    usage: list = []
    rt = make_runtime(model_cache)
    await rt.start(usage_sink=usage.append)
    yield rt, usage
    await rt.stop()


async def test_rag_workflow_runs_end_to_end(world):
    rt, usage = world
    handle = rt.submit_run(run_request("rag", query="where is Paris, France?"))
    deltas = [d async for d in handle.stream()]
    result = await asyncio.wait_for(handle.result(), 30)
    assert result.status == "succeeded", result
    assert isinstance(result.outputs["answer"], str) and result.outputs["answer"]
    assert len(result.outputs["documents"]) == 3
    assert set(result.outputs["documents"]) <= set(DOCS)
    assert "".join(d.text for d in deltas) == result.outputs["answer"]
    nodes = sorted(u.node_id for u in result.usage)
    assert nodes == ["embed", "gen", "rerank", "search"]
    gen = next(u for u in result.usage if u.node_id == "gen")
    assert gen.input_tokens > 0 and 0 < gen.output_tokens <= 6 and gen.cost_units > 0
    assert gen.device == "cpu:1" and gen.device_us > 0 and gen.attempt == 1
    assert {u.idempotency_key for u in usage} >= {u.idempotency_key for u in result.usage}


async def test_independent_branches_run_concurrently(world):
    rt, _ = world
    started = clock.monotonic()
    result = await asyncio.wait_for(rt.submit_run(run_request("branches", text="x")).result(), 20)
    took = clock.monotonic() - started
    assert result.status == "succeeded", result
    devices = {u.node_id: u.device for u in result.usage}
    assert devices["right"] == "cpu:1"
    # Each branch sleeps 0.4 s; one after the other would take at least 0.8 s.
    assert took < 0.75, f"branches took {took:.2f} s: they did not overlap"


async def test_concurrent_load_is_batched(world):
    rt, _ = world
    handles = [rt.submit_run(run_request("embed-only", text=f"sentence {i}")) for i in range(12)]
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 30)
    assert all(r.status == "succeeded" for r in results), results
    sizes = [r.usage[0].batch_size for r in results]
    assert max(sizes) > 1, sizes
    assert all(len(r.outputs["vector"]) == 32 for r in results)  # tiny BERT hidden size


async def test_wakeup_dispatches_a_lone_item_after_the_max_queue_delay(world):
    rt, _ = world
    started = clock.monotonic()
    result = await asyncio.wait_for(rt.submit_run(run_request("embed-only", text="a")).result(), 5)
    took = clock.monotonic() - started
    assert result.status == "succeeded"
    assert result.usage[0].batch_size == 1
    # Nothing else arrives: only the wake-up at the batching deadline can dispatch it.
    assert MAX_DELAY_S <= took < MAX_DELAY_S + 1.0, took


async def test_unknown_workflow_and_duplicate_are_refused(world):
    rt, _ = world
    bad = await rt.submit_run(run_request("nope", text="a")).result()
    assert bad.status == "rejected" and "nope" in (bad.error or "")
    req = run_request("embed-only", text="a")
    first, second = rt.submit_run(req), rt.submit_run(req)
    assert (await second.result()).status == "failed"
    assert (await first.result()).status == "succeeded"


async def test_metrics_and_snapshot(world):
    rt, _ = world
    await rt.submit_run(run_request("embed-only", text="metrics")).result()
    await asyncio.sleep(0.3)  # one sampling interval
    text = generate_latest(rt.metrics.registry).decode()
    assert 'legato_batch_size_count{model="embed:1"}' in text
    assert 'legato_tokens_total{direction="input",model="embed:1"}' in text
    assert "legato_device_utilization_ratio" in text
    snap = rt.snapshot()
    assert {d.device_id for d in snap.devices} == {"cpu:0", "cpu:1"}
    assert snap.counters.get("runs.succeeded", 0) >= 1


async def test_bytes_moved_between_workers_are_counted_per_model(world):
    """The RAG run's search runs beside its embedding on cpu:0 and its rerank on cpu:1: the
    documents move worker to worker, and the executor's count of them reaches /metrics."""
    rt, _ = world
    moved = lambda: rt.metrics.registry.get_sample_value(  # noqa: E731
        "legato_moved_bytes_total", {"model": "rerank:1"}) or 0.0  # fmt: skip
    before = moved()
    result = await asyncio.wait_for(rt.submit_run(run_request("rag", query="fox")).result(), 30)
    assert result.status == "succeeded", result
    assert moved() > before


async def test_a_started_runtime_has_frozen_the_start_up_heap(world):
    import gc

    from control.executor import heap

    assert heap._startup_frozen is True and gc.get_freeze_count() > 0
