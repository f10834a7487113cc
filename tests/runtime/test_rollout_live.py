"""Placement rollouts carried out on the real executor with tiny models.

* A rollout that moves the embedding model to the other device while runs keep arriving:
  every run completes, the transitions reach the ``on_rollout`` callback in order, and the
  fleet ends in the target placement.
* A rollout whose new replica cannot load (a model ref naming no buildable model): the core
  aborts, the previous placement is restored, and the callback sees ``aborted``.

Synchronisation is on facts (snapshot state, resolved handles), never on elapsed time.
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from control.core.actions import RolloutTransition
from control.core.events import PlacementChanged
from control.executor.protocol import ModelRef
from tests.runtime.conftest import make_runtime, run_request
from tests.support.waiting import until

pytestmark = pytest.mark.asyncio(loop_scope="module")

#: The conftest placement with embed:1 moved from cpu:0 to cpu:1.
MOVED = (
    ("embed:1", ("cpu:1",), 1, "hot"),
    ("rerank:1", ("cpu:1",), 1, "hot"),
    ("gen:1", ("cpu:1",), 1, "hot"),
    ("slow:1", ("cpu:0",), 1, "hot"),
    ("slow:1", ("cpu:1",), 1, "hot"),
    ("slow2:1", ("cpu:1",), 1, "hot"),
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(model_cache):
    seen: list[RolloutTransition] = []
    rt = make_runtime(model_cache, on_rollout=seen.append)
    await rt.start()
    yield rt, seen
    await rt.stop()


async def _until(predicate, what: str, timeout: float = 30.0):  # noqa: ANN001, ANN202
    return await until(predicate, what, timeout)


def _placement(rt) -> dict[tuple[str, tuple[str, ...]], int]:
    """Ready, non-speculative replicas per (model, devices)."""
    out: dict[tuple[str, tuple[str, ...]], int] = {}
    for r in rt.snapshot().replicas:
        if r.state.lower().endswith("ready") and not r.speculative:
            key = (r.model_key, r.device_ids)
            out[key] = out.get(key, 0) + 1
    return out


def _finished(rt, plan_id: str) -> str | None:
    ro = rt.snapshot().rollout
    if ro is None or ro.plan_id != plan_id or ro.state in ("loading", "draining"):
        return None
    return ro.state


async def test_rollout_under_load_completes_every_run(world):
    rt, seen = world
    seen.clear()
    before = _placement(rt)
    assert before.get(("embed:1", ("cpu:0",))) == 1
    handles = [rt.submit_run(run_request("embed-only", text=f"before {i}")) for i in range(4)]
    await rt.ingest(PlacementChanged("p-move", MOVED, reason="move embed"))
    n = 0
    while _finished(rt, "p-move") is None:  # keep the load on until the rollout ends
        handles.append(rt.submit_run(run_request("embed-only", text=f"during {n}")))
        n += 1
        await asyncio.sleep(0.02)
    handles += [rt.submit_run(run_request("embed-only", text=f"after {i}")) for i in range(4)]
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 60)
    statuses = [r.status for r in results]
    assert statuses.count("succeeded") == len(handles), statuses
    assert n >= 1, "the rollout finished before any run was submitted during it"
    assert _finished(rt, "p-move") == "completed"
    after = _placement(rt)
    assert after.get(("embed:1", ("cpu:1",))) == 1
    assert ("embed:1", ("cpu:0",)) not in after
    states = [(t.plan_id, t.to_state) for t in seen]
    assert states[0] == ("p-move", "loading")
    assert states[-1] == ("p-move", "completed")


async def test_failing_load_restores_previous_placement(world):
    rt, seen = world
    seen.clear()
    before = _placement(rt)
    good = rt.model_refs["rerank:1"]
    rt.model_refs["rerank:1"] = ModelRef("rerank:1", "rerank", "tiny", "no-such-arch")
    try:
        extra = (*MOVED, ("rerank:1", ("cpu:0",), 1, "hot"))
        await rt.ingest(PlacementChanged("p-bad", extra, reason="add a rerank replica"))
        await _until(lambda: any(t.to_state == "aborted" for t in seen), "the abort")
        await _until(lambda: _finished(rt, "p-bad:rollback"), "the restore")
    finally:
        rt.model_refs["rerank:1"] = good
    assert _finished(rt, "p-bad:rollback") == "completed"
    assert _placement(rt) == before
    aborted = [t for t in seen if t.to_state == "aborted"]
    assert aborted[0].plan_id == "p-bad"
    result = await asyncio.wait_for(rt.submit_run(run_request("embed-only", text="x")).result(), 30)
    assert result.status == "succeeded"
