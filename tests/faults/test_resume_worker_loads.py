"""A restarted worker gets each replica it lost back once: the core alone decides the loads
(``control.core.restore``), counting the replacements it loaded elsewhere while the device was
down, so the runtime does not restore the same placement a second time. Real live runtime,
two CPU workers; the worker of ``cpu:1`` (rerank, gen, slow, slow2) is killed, a RAG run comes
while its ``WorkerUp`` is held back (deterministic: the run needs rerank and gen while the
device is down, so the core loads them on ``cpu:0``), then the device comes back."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter

from control.core.types import Request
from control.runtime.types import RunRequest
from tests.faults import resume_world as w
from tests.support.waiting import until as _until


def _up(rt, device: str) -> bool:  # noqa: ANN001
    return any(d.device_id == device and d.up for d in rt.snapshot().devices)


def _ready(rt, model: str, device: str) -> bool:  # noqa: ANN001
    return any(r.model_key == model and r.device_ids == (device,) and r.state == "ready"
               for r in rt.snapshot().replicas)  # fmt: skip


def _run(query: str) -> RunRequest:
    return RunRequest(Request(f"r-{query}", "acme", "rag:1", prompt_tokens=8,
                              max_output_tokens=6), {"query": query})  # fmt: skip


async def test_a_restarted_worker_loads_each_lost_replica_once(model_cache) -> None:  # noqa: ANN001
    ex = w.executor(model_cache)
    rt = w.runtime(ex)
    await rt.start()
    try:
        before = Counter(ex.loads)
        ex.hold_up = True
        os.kill(ex.worker_pid("cpu:1"), signal.SIGKILL)
        await _until(lambda: not _up(rt, "cpu:1"), "cpu:1 down")
        result = await asyncio.wait_for(rt.submit_run(_run("fox")).result(), 60)
        assert result.status == "succeeded", result  # served on cpu:0 meanwhile
        await _until(lambda: ex.held_up, "the restarted worker's WorkerUp")
        ex.release_up()
        await _until(lambda: _ready(rt, "slow2:1", "cpu:1") and _ready(rt, "slow:1", "cpu:1"),
                     "cpu:1's replicas restored")  # fmt: skip
        loads = Counter(ex.loads)
        loads.subtract(before)
        assert +loads == Counter({("rerank:1", "cpu:0"): 1, ("gen:1", "cpu:0"): 1,
                                  ("slow:1", "cpu:1"): 1, ("slow2:1", "cpu:1"): 1,
                                  ("index:docs", "cpu:1"): 1}), loads  # fmt: skip
        by_model = Counter(r.model_key for r in rt.snapshot().replicas)
        assert by_model == Counter({"embed:1": 1, "rerank:1": 1, "gen:1": 1, "slow:1": 2,
                                    "slow2:1": 1})  # fmt: skip
        again = await asyncio.wait_for(rt.submit_run(_run("dog")).result(), 60)
        assert again.status == "succeeded", again
    finally:
        await rt.stop()
