"""Tensor-parallel replicas on Ray (issue 23, item 3): a replica of degree 2 is a STRICT_PACK
placement group of two bundles on the node holding its two devices, holds both devices (each
lists it, the second counts its MiB: the model code does not shard on CPU, it runs on the
first), and is refused with a reason naming k and the most any node has free when no node has
two devices with room even after evicting their idle replicas (a busy one is never evicted); an
idle group replica is evicted from every device it holds to make room. Its own cluster: a head
with 2 CPU slots and a node with 1."""

from __future__ import annotations

import time

import pytest

from control.executor.protocol import Batch, BatchItem, GenParams, ModelRef, ReplicaEvicted, StepKey
from control.executor.ray import RayExecutor, RayExecutorConfig
from tests.executor.conftest import all_done, completions
from tests.ray.conftest import STORE, Cluster, ray, wait_until

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def rex(model_cache):
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "object_store_memory": STORE,
                                                      "include_dashboard": False})  # fmt: skip
    c.add_node(num_cpus=1, object_store_memory=STORE)
    ray.init(address=c.address, log_to_driver=False)
    c.wait_for_nodes()
    ex = RayExecutor(RayExecutorConfig(heartbeat_s=0.4, cache_dir=str(model_cache)))
    ex.start()
    try:
        assert ex.wait_ready(120), "actors did not start"
        yield ex
    finally:
        ex.stop()
        ray.shutdown()
        c.shutdown()


def tp_model(ex, name: str, share: float = 0.6) -> ModelRef:
    """A tiny model planned at ``share`` of a head device (60%: two never share a device)."""
    budget = next(d for d in ex.devices() if d.device_id == "cpu:0").memory_budget_mib
    return ModelRef(name, "embed", "tiny", "bert", expected_mib=int(budget * share))


def groups_now() -> list[dict]:
    return [g for g in ray.util.placement_group_table().values() if g["state"] == "CREATED"]


def test_degree_two_replica_holds_two_devices_of_one_node(rex):
    assert sorted(d.device_id for d in rex.devices() if "/" not in d.device_id) == [
        "cpu:0",
        "cpu:1",
    ]
    ref = tp_model(rex, "tp-a")
    report = rex.load("tp", ref, "cpu:0", group=("cpu:0", "cpu:1")).result(120)
    assert report.ok, report.reason
    status = {s.device_id: s for s in rex.heartbeat()}
    assert "tp" in status["cpu:0"].replicas and "tp" in status["cpu:1"].replicas
    assert status["cpu:1"].used_mib >= ref.expected_mib  # held there for the group
    [pg] = groups_now()
    assert pg["strategy"] == "STRICT_PACK" and len(pg["bundles"]) == 2
    head = ray.get_runtime_context().get_node_id()
    assert set(pg["bundles_to_node_id"].values()) == {head}
    rex.submit(Batch("b1", "tp", (BatchItem(StepKey("r", "e"), "k1", {"text": "hello"}),)))
    assert completions(wait_until(rex, all_done(["k1"])))["k1"].ok


def test_refused_with_a_reason_when_no_node_has_two_free(rex):
    """cpu:1 holds tp (idle) and a replica running a batch: evicting tp would not make room
    there, so the load is refused, and evicts nothing."""
    hold = tp_model(rex, "hold", 0.3)
    assert rex.load("hold", ModelRef("hold", "noop", "tool", expected_mib=hold.expected_mib),
                    "cpu:1").result(60).ok  # fmt: skip
    item = BatchItem(StepKey("r", "h"), "k-hold", {"x": 1}, GenParams(busy_ms=3000))
    rex.submit(Batch("b-hold", "hold", (item,)))
    while not next(s for s in rex.heartbeat() if s.device_id == "cpu:1").running:
        time.sleep(0.02)  # until the busy batch runs
    report = rex.load("tp2", tp_model(rex, "tp-b", 0.75), "cpu:0",
                      group=("cpu:0", "cpu:1")).result(30)  # fmt: skip
    assert not report.ok
    assert "tp_degree 2" in report.reason and "most free: 1" in report.reason, report.reason
    assert len(groups_now()) == 1  # no second group was asked for
    assert "tp2" not in {r for s in rex.heartbeat() for r in s.replicas}
    assert all("tp" in s.replicas for s in rex.heartbeat() if "/" not in s.device_id)
    assert completions(wait_until(rex, all_done(["k-hold"])))["k-hold"].ok


def test_a_group_load_evicts_an_idle_group_replica_from_every_device(rex):
    """tp (idle, used before hold) is evicted for tp4 on both devices; hold stays (cpu:1 then
    has room for it beside tp4)."""
    report = rex.load("tp4", tp_model(rex, "tp-d"), "cpu:0", group=("cpu:0", "cpu:1")).result(120)
    assert report.ok and report.evicted == ("tp",), report
    status = {s.device_id: s for s in rex.heartbeat()}
    assert all("tp" not in status[d].replicas and "tp4" in status[d].replicas
               for d in ("cpu:0", "cpu:1"))  # fmt: skip
    assert "hold" in status["cpu:1"].replicas
    assert len(groups_now()) == 1  # tp's group was freed, tp4's made
    evicted = [e for e in wait_until(rex, lambda s: any(isinstance(e, ReplicaEvicted) for e in s))
               if isinstance(e, ReplicaEvicted)]  # fmt: skip
    assert [(e.replica_id, e.device_id) for e in evicted] == [("tp", "cpu:0")]


def test_unload_frees_both_devices_and_the_group(rex):
    rex.unload("tp4").result(30)
    rex.unload("hold").result(30)
    assert not groups_now()
    assert all(not s.replicas for s in rex.heartbeat())
    report = rex.load("tp3", tp_model(rex, "tp-c"), "cpu:1", group=("cpu:0", "cpu:1")).result(120)
    assert report.ok, report.reason
    rex.unload("tp3").result(30)
