"""The live runtime and core over a Ray cluster whose nodes come and go (issue 23, items 2 and
5): the cluster's devices are the core's fleet (a node is a topology domain), the RAG workflow
runs with its steps on two nodes and answers as on the local executor, a node added while
serving takes work, a node removed mid-burst loses nothing and bills nothing twice (and its
device is then down for good: not counted as restarting, ``down`` in the device registry), and
a placement rollout moves a model from one node to another under load.

One cluster for the module (the conftest's: a head and a second node, one CPU slot each, the
object store capped); a third node is added and then removed by the tests, in order. The core
starts with NO device: every device comes from the executor's view of the cluster.
Synchronisation is on facts (snapshot state, usage records), never on elapsed time alone.
"""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter

import pytest
import pytest_asyncio

from control.core.assembly import CoreBlueprint
from control.core.batching.size_delay import SizeDelayConfig
from control.core.context import CoreConfig
from control.core.events import PlacementChanged
from control.core.latency import TableLatencyModel
from control.core.tenancy.base import TenancyConfig, TenantSpec
from control.executor.ray import RayExecutor, RayExecutorConfig
from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig
from control.runtime.state import IndexSpec
from control.services import build_services
from control.services.live_devices import register_device
from control.wiring.live import _deregistrar
from db.session import make_engine, make_session_factory
from tests.ray.conftest import STORE
from tests.runtime.conftest import BERT, DOCS, MODELS, REFS, WORKFLOWS, make_runtime, run_request
from tests.support.waiting import until

pytestmark = [pytest.mark.ray, pytest.mark.asyncio(loop_scope="module")]

QUERIES = ("where is paris", "what does legato serve")
ADDED: dict = {}  # the node the join test adds and the removal test removes


def remote_id(node) -> str:  # noqa: ANN001 - a cluster_utils node
    return f"{node.node_id[:8]}/cpu:0"


@pytest.fixture(scope="module")
def registry(_sqlite_template, tmp_path_factory):  # noqa: ANN001
    """The device registry (services over a migrated SQLite database) the runtime reports to."""
    path = tmp_path_factory.mktemp("registry") / "legato.db"
    shutil.copyfile(_sqlite_template, path)
    engine = make_engine(f"sqlite:///{path}")
    yield build_services(make_session_factory(engine))
    engine.dispose()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(cluster, model_cache, registry):
    c, second = cluster
    there = remote_id(second)
    executor = RayExecutor(RayExecutorConfig(heartbeat_s=0.3, cache_dir=str(model_cache),
                                             poll_queue=False))  # fmt: skip
    blueprint = CoreBlueprint(
        devices=(),  # the executor's cluster view is the fleet
        models=MODELS,
        workflows=WORKFLOWS,
        tenancy=TenancyConfig(tenants=(TenantSpec("t1", 1),)),
        core_config=CoreConfig(batching_config=SizeDelayConfig(max_queue_delay_s=0.02)),
    )
    placement = (InitialReplica("embed:1", "cpu:0"), InitialReplica("rerank:1", there),
                 InitialReplica("gen:1", there))  # fmt: skip
    joined: list = []
    usage: list = []
    rt = LiveRuntime(blueprint, TableLatencyModel(), executor, REFS, placement,
                     RuntimeConfig(indexes=(IndexSpec("docs", DOCS, BERT),), sample_every_s=0.5),
                     on_device_joined=lambda info, spec: joined.append((info, spec)),
                     on_device_left=_deregistrar(registry))  # fmt: skip
    # the wiring's registrar, synchronously (a few ms of SQLite) so the rows are there at once
    rt.on_device_joined = lambda info, spec: (joined.append((info, spec)),
                                              register_device(registry, info, spec))  # fmt: skip
    await rt.start(usage_sink=usage.append)
    yield rt, c, joined, usage, there
    await rt.stop()


def up_devices(rt) -> set[str]:
    return {d.device_id for d in rt.snapshot().devices if d.up}


def placed(rt, model: str) -> set[tuple[str, ...]]:
    return {r.device_ids for r in rt.snapshot().replicas
            if r.model_key == model and r.state.lower().endswith("ready")}  # fmt: skip


async def roll_out(rt, plan_id: str, replicas: tuple, load=None) -> None:  # noqa: ANN001
    """Ingest a placement and wait until its rollout ends (``load()`` called meanwhile)."""
    await rt.ingest(PlacementChanged(plan_id, replicas, reason="test"))

    def ended():
        ro = rt.snapshot().rollout
        return ro is not None and ro.plan_id == plan_id and ro.state not in ("loading", "draining")

    while not ended():
        if load is not None:
            load()
        await asyncio.sleep(0.05)
    assert rt.snapshot().rollout.state == "completed", rt.snapshot().rollout


def billed_once(usage: list, runs: list) -> Counter:
    """Every usage record's key billed once; the records of ``runs`` by run."""
    keys = Counter(u.idempotency_key for u in usage)
    assert [k for k, n in keys.items() if n > 1] == []
    ids = {r.request.request_id for r in runs}
    return Counter(u.request_id for u in usage if u.request_id in ids)


async def rag(rt, queries=QUERIES) -> list:  # noqa: ANN001
    handles = [rt.submit_run(run_request("rag", query=q)) for q in queries]
    return await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 90)


async def test_the_cluster_devices_are_the_fleet_with_their_topology(world, cluster):
    rt, _, joined, _, _ = world
    head, second = cluster[0].head_node, cluster[1]
    assert up_devices(rt) == {"cpu:0", remote_id(second)}
    specs = {spec.device_id: spec for _, spec in joined}
    assert specs["cpu:0"].node_id == head.node_id
    assert specs[remote_id(second)].node_id == second.node_id
    # a CPU node's slots share the node's group (GPUs: the node's NVLink domain label)
    assert specs[remote_id(second)].interconnect_group == second.node_id


async def test_rag_steps_on_two_nodes_answer_as_the_local_executor(world, model_cache):
    rt, _, _, usage, _ = world
    results = await rag(rt)
    assert [r.status for r in results] == ["succeeded"] * len(QUERIES), results
    mine = [u for u in usage if u.request_id in {r.request_id for r in results}]
    where = {u.node_id: u.device for u in mine}
    assert where["embed"] == "cpu:0" and where["rerank"] != "cpu:0" and where["gen"] != "cpu:0"
    local = make_runtime(model_cache)
    await local.start()
    try:
        expected = await rag(local)
    finally:
        await local.stop()
    assert [r.outputs for r in results] == [r.outputs for r in expected]


async def test_a_node_added_while_serving_takes_work(world):
    rt, c, joined, usage, second = world
    handles = []
    serving = asyncio.get_running_loop().create_task(_keep_serving(rt, handles))
    await until(lambda: len(handles) >= 3, "runs in flight")
    # on the main thread (Ray sets signal handlers); not waiting for the node to register
    third = c.add_node(wait=False, num_cpus=1, object_store_memory=STORE)
    new = remote_id(third)
    await until(lambda: new in up_devices(rt), "the new node's device in the core", 90)
    assert any(info.device_id == new and info.node == third.node_id for info, _ in joined)
    grown = (("embed:1", (new,), 1, "hot"), ("rerank:1", (second,), 1, "hot"),
             ("rerank:1", (new,), 1, "hot"), ("gen:1", (second,), 1, "hot"),
             ("gen:1", (new,), 1, "hot"))  # fmt: skip
    await roll_out(rt, "p-join", grown)
    serving.cancel()
    assert placed(rt, "embed:1") == {(new,)}
    burst = [rt.submit_run(run_request("embed-only", text=f"joined {i}")) for i in range(12)]
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles + burst)), 90)
    assert all(r.status == "succeeded" for r in results), [r for r in results if r.error]
    ids = {h.request_id for h in burst}
    assert {u.device for u in usage if u.request_id in ids} == {new}
    ADDED["node"] = third


async def _keep_serving(rt, handles: list) -> None:  # noqa: ANN001
    n = 0
    while True:
        handles.append(rt.submit_run(run_request("embed-only", text=f"while joining {n}")))
        n += 1
        await asyncio.sleep(0.1)


async def test_a_node_removed_mid_burst_loses_nothing_and_bills_nothing_twice(world, registry):
    rt, c, _, usage, second = world
    third = ADDED["node"]
    gone = remote_id(third)
    spread = (("embed:1", ("cpu:0",), 1, "hot"), ("embed:1", (gone,), 1, "hot"),
              ("rerank:1", (second,), 1, "hot"), ("rerank:1", (gone,), 1, "hot"),
              ("gen:1", (second,), 1, "hot"), ("gen:1", (gone,), 1, "hot"),
              ("slow:1", (gone,), 1, "hot"), ("slow:1", (second,), 1, "hot"))  # fmt: skip
    await roll_out(rt, "p-spread", spread)
    retried = rt.snapshot().counters.get("StepRetried", 0)
    embeds = [run_request("embed-only", text=f"burst {i}") for i in range(50)]
    rags = [run_request("rag", query=f"{QUERIES[i % 2]} {i}") for i in range(10)]
    # slow steps (1.5 s) on both nodes: the node certainly dies with work running on it
    slow = [run_request("slow-one", text=f"slow {i}") for i in range(4)]
    handles = [rt.submit_run(r) for r in slow + embeds + rags]
    await until(lambda: any(s.busy for s in rt.executor.heartbeat() if s.device_id == gone),
                "a batch running on the node")  # fmt: skip
    await asyncio.to_thread(c.remove_node, third)
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
    assert [r for r in results if r.status != "succeeded"] == []
    assert gone not in up_devices(rt)
    assert rt.snapshot().counters.get("StepRetried", 0) > retried  # what ran there ran again
    per_run = billed_once(usage, slow + embeds + rags)
    assert all(per_run[r.request.request_id] == 1 for r in slow + embeds), per_run
    for r in rags:  # each model step of each run billed once, beside a lineage recomputation
        billed = [u for u in usage if u.request_id == r.request.request_id]
        assert {"embed", "rerank", "gen"} <= {u.node_id for u in billed}, billed
        # an output lost with the node is made again under its recomputation key (``~r<g>``,
        # ``control.core.dag.lineage``): that is new work, billed once; nothing else twice
        first = [u.node_id for u in billed if "~r" not in u.idempotency_key]
        assert len(first) == len(set(first)), billed
    # once Ray's node table shows the node gone, its device is down for good, not restarting
    row = lambda: registry.devices.list(name=gone)[0]  # noqa: E731
    await until(lambda: row().status == "down", "the gone device down in the registry", 60)
    assert rt.devices_restarting() == 0 and gone not in up_devices(rt)
    assert registry.nodes.get(row().node_id).status == "down"


async def test_a_rollout_moves_a_model_between_nodes_under_load(world):
    rt, _, _, usage, second = world
    assert ("cpu:0",) in placed(rt, "embed:1")
    handles = [rt.submit_run(run_request("embed-only", text=f"before {i}")) for i in range(4)]
    moved = (("embed:1", (second,), 1, "hot"), ("rerank:1", (second,), 1, "hot"),
             ("gen:1", (second,), 1, "hot"), ("slow:1", (second,), 1, "hot"))  # fmt: skip
    load = lambda: handles.append(rt.submit_run(run_request("embed-only", text="during")))  # noqa: E731
    await roll_out(rt, "p-move", moved, load)
    handles += [rt.submit_run(run_request("embed-only", text=f"after {i}")) for i in range(4)]
    results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 90)
    assert [r for r in results if r.status != "succeeded"] == []
    assert placed(rt, "embed:1") == {(second,)}
    after = {h.request_id for h in handles[-4:]}
    assert {u.device for u in usage if u.request_id in after} == {second}
    billed_once(usage, [])
