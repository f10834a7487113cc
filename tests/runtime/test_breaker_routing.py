"""Breaker-aware routing, live (issue 24, item 7): the replica of ``slow:1`` on cpu:0 is broken
(every batch raises), the one on cpu:1 is healthy. The first failure opens cpu:0's breaker
(threshold 1); the executor reports it before the failure itself, the core stops routing to
cpu:0, the failed attempt is retried on cpu:1, and every later run goes to cpu:1 until the
cooldown ends. Then the core sends cpu:0 one batch, the probe; it fails again, the breaker
reopens, and that probe's step is retried on cpu:1 too: no run fails."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
import pytest_asyncio

from control.core.dag.spec import dag_from_dict
from control.executor.host.breaker import BreakerConfig
from tests.runtime.conftest import WORKFLOWS, make_runtime, run_request
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="module")

COOLDOWN_S = 1.5
ANY_SLOW = {
    "workflow": "slow-any",
    "inputs": {"text": "text"},
    "nodes": [{"id": "s", "task": "classify", "model": "slow:1", "retries": 1,
               "params": {"busy_ms": 20}}],
    "edges": [{"from": "input.text", "to": "s.text"}],
}  # fmt: skip


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(model_cache):
    usage: list = []
    rt = make_runtime(model_cache, WORKFLOWS + (dag_from_dict(ANY_SLOW),),
                      breaker=BreakerConfig(failure_threshold=1, cooldown_s=COOLDOWN_S))  # fmt: skip
    real_load = rt.executor.load

    def load(replica_id, ref, device, **kw):  # noqa: ANN001, ANN003, ANN202
        if ref.name == "slow:1" and device == "cpu:0":  # this one replica is broken
            ref = dataclasses.replace(ref, options={"fail": "broken replica on cpu:0"})
        return real_load(replica_id, ref, device, **kw)

    rt.executor.load = load
    await rt.start(usage_sink=usage.append)
    yield rt, usage
    await rt.stop()


def _slow_replica(rt, device: str) -> str:  # noqa: ANN001
    return next(r.replica_id for r in rt.snapshot().replicas
                if r.model_key == "slow:1" and r.device_ids == (device,))  # fmt: skip


async def _run_all(rt, n: int) -> list:  # noqa: ANN001
    handles = [rt.submit_run(run_request("slow-any", text=f"t{i}")) for i in range(n)]
    return await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)


async def test_an_open_breaker_is_routed_around_and_probed_after_its_cooldown(world):
    rt, usage = world
    broken = _slow_replica(rt, "cpu:0")
    results = await _run_all(rt, 12)
    assert [r.status for r in results] == ["succeeded"] * 12, [r.error for r in results]
    assert rt.executor.breaker_state(broken) == "open"
    views = {r.replica_id: r.breaker for r in rt.snapshot().replicas}
    assert views[broken] == "open" and views[_slow_replica(rt, "cpu:1")] == "closed"
    counters = rt.snapshot().counters
    assert counters.get("breakers.opened", 0) >= 1
    billed = [u for u in usage if u.model == "slow:1"]
    assert billed and all(u.device == "cpu:1" for u in billed)  # only the healthy one ran
    # within the cooldown the core sends nothing to cpu:0: the executor refuses nothing
    refused_before = counters.get("StepRetried", 0)
    more = await _run_all(rt, 8)
    assert all(r.status == "succeeded" for r in more)
    assert rt.snapshot().counters.get("StepRetried", 0) == refused_before
    # after the cooldown the core probes cpu:0 with one batch: it fails, the breaker reopens,
    # and the probe's step is retried on cpu:1
    await asyncio.sleep(COOLDOWN_S + 0.3)
    probed = await _run_all(rt, 6)
    assert all(r.status == "succeeded" for r in probed), [r.error for r in probed]
    await until(lambda: rt.snapshot().counters.get("breakers.opened", 0) >= 2,
                "the failed probe to reopen the breaker", 10)  # fmt: skip
    assert rt.executor.breaker_state(broken) == "open"
    assert all(u.device == "cpu:1" for u in usage if u.model == "slow:1")
