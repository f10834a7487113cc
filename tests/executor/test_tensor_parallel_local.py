"""A replica spanning two devices (tensor parallel degree 2) on the local executor (issue 23,
item 3): the model code does not shard on CPU, so the replica runs on its first device but holds
its memory on BOTH (each worker's status lists it and counts its MiB); it is refused, naming the
device, when either cannot hold it; unloading frees both. Before the group was passed, the load
took only the first device and the second stayed empty."""

from __future__ import annotations

import time

import pytest

from control import clock
from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.protocol import Batch, BatchItem, DeviceInfo, ModelRef, StepKey
from tests.executor.conftest import all_done, completions, wait_for

TP = ModelRef("tp-bert", "embed", "tiny", "bert", expected_mib=200)
#: cpu:1 is the smaller device: 300 MiB fits on cpu:0 alone, not on the pair
DEVICES = [DeviceInfo("cpu:0", "cpu", 0, 512), DeviceInfo("cpu:1", "cpu", 1, 256)]


@pytest.fixture(scope="module")
def ex(model_cache):
    config = ExecutorConfig(heartbeat_s=0.4, cache_dir=str(model_cache), use_cuda=False)
    ex = LocalExecutor(config, devices=DEVICES)
    ex.start()
    assert ex.wait_ready(90), "workers did not start"
    yield ex
    ex.stop()


def status(ex) -> dict:
    return {s.device_id: s for s in ex.heartbeat()}


def settled(ex, predicate, timeout: float = 10.0) -> dict:
    deadline = clock.monotonic() + timeout
    while not predicate(now := status(ex)) and clock.monotonic() < deadline:
        time.sleep(0.1)
    return now


def test_degree_two_replica_holds_both_devices_and_runs(ex):
    report = ex.load("tp", TP, "cpu:0", group=("cpu:0", "cpu:1")).result(90)
    assert report.ok, report.reason
    now = settled(ex, lambda s: "tp" in s["cpu:0"].replicas)  # the worker's next heartbeat
    assert "tp" in now["cpu:1"].replicas, now["cpu:1"]  # held there for its group
    assert now["cpu:1"].used_mib >= 200 and now["cpu:0"].used_mib > 0, now
    ex.submit(Batch("b1", "tp", (BatchItem(StepKey("r", "e"), "k1", {"text": "hello"}),)))
    assert completions(wait_for(ex, all_done(["k1"]), 60))["k1"].ok


def test_refused_when_one_device_of_the_group_cannot_hold_it(ex):
    big = ModelRef("tp-big", "embed", "tiny", "bert", expected_mib=300)  # cpu:1 has 256
    report = ex.load("tp2", big, "cpu:0", group=("cpu:0", "cpu:1")).result(30)
    assert not report.ok
    assert "2 devices" in report.reason and "cpu:1 cannot hold it" in report.reason, report.reason
    assert "tp2" not in {r for s in ex.heartbeat() for r in s.replicas}
    assert "tp" in status(ex)["cpu:1"].replicas  # the refusal evicted nothing


def test_unload_frees_every_device(ex):
    ex.unload("tp").result(30)
    now = settled(ex, lambda s: all("tp" not in d.replicas for d in s.values()))
    assert all("tp" not in s.replicas for s in now.values()), now
    assert (
        ex.load("solo", ModelRef("s", "embed", "tiny", "bert", expected_mib=250), "cpu:1")
        .result(60)
        .ok
    )  # cpu:1 has its whole budget again
    ex.unload("solo").result(30)
