"""The RayExecutor keeps the executor Protocol on a two-node cluster: devices from Ray's view,
loads, a batch of real (tiny-model) embeddings, outputs fetched, cancel, release."""

from __future__ import annotations

import pytest

from control.executor.protocol import Batch, BatchItem, GenParams, ItemCompleted, ModelRef, StepKey
from tests.executor.conftest import all_done, completions
from tests.ray.conftest import remote_device, wait_until

pytestmark = pytest.mark.ray

BERT = ModelRef("tiny-bert", "embed", "tiny", "bert")
NOOP = ModelRef("noop", "noop", "tool")


def item(key, run, node, inputs, **params):
    return BatchItem(StepKey(run, node), key, inputs, GenParams(**params))


def test_devices_are_the_cluster_nodes_cpu_slots(rex, cluster):
    devices = rex.devices()
    assert len(devices) == 2
    assert devices[0].device_id == "cpu:0"  # the driver's node keeps the local ids
    other = devices[1]
    assert other.device_id.endswith("/cpu:0") and other.node == cluster[1].node_id
    assert devices[0].node != other.node and all(d.kind == "cpu" for d in devices)
    assert all(dict(d.labels)["address"] and d.memory_budget_mib > 0 for d in devices)
    status = {s.device_id: s for s in rex.heartbeat()}
    assert all(s.alive and s.pid for s in status.values())


def test_embeddings_fetch_cancel_release(rex):
    dev = remote_device(rex)
    assert rex.load("bert-c", BERT, dev).result(timeout=60).ok
    assert rex.load("noop-c", NOOP, dev).result(timeout=60).ok
    with pytest.raises(Exception, match="already loaded"):
        rex.load("bert-c", BERT, dev)
    texts = ["a cat sat", "the quick brown fox", "paris is in france"]
    items = tuple(item(f"e{i}", "r1", f"n{i}", {"text": t}) for i, t in enumerate(texts))
    rex.submit(Batch("b1", "bert-c", items))
    done = completions(wait_until(rex, all_done({"e0", "e1", "e2"})))
    assert all(r.ok and r.device_id == dev and r.batch_size == 3 for r in done.values())
    vector = rex.fetch_output("r1", "n1").result(timeout=30)["vector"]
    assert len(vector) == 32 and abs(sum(v * v for v in vector) - 1.0) < 1e-4
    # a key submitted again is answered from the store, not run again
    rex.submit(Batch("b1-again", "bert-c", items[:1]))
    again = completions(wait_until(rex, all_done({"e0"})))["e0"]
    assert again.replayed and again.ok
    # two long batches fill the actor; the third waits here and is cancelled
    for i in range(3):
        rex.submit(Batch(f"slow{i}", "noop-c", (item(f"s{i}", "r2", f"s{i}", {"x": i},
                                                      busy_ms=600),)))  # fmt: skip
    rex.cancel(["s2"])
    got = completions(wait_until(rex, all_done({"s0", "s1", "s2"})))
    assert got["s0"].ok and got["s1"].ok
    assert got["s2"].cause == "cancelled" and not got["s2"].ok
    rex.release_run("r1")
    with pytest.raises(KeyError):
        rex.fetch_output("r1", "n1").result(timeout=30)
    assert rex.unload("bert-c").result(timeout=30) >= 0
    rex.submit(Batch("b2", "bert-c", (item("e9", "r3", "n", {"text": "x"}),)))
    late = completions(wait_until(rex, all_done({"e9"})))["e9"]
    assert late.cause == "unavailable" and late.retriable
    assert rex.unload("noop-c").result(timeout=30) == 0


def test_a_load_that_fails_is_a_report(rex):
    bad = ModelRef("bad", "embed", "tiny", "no-such-arch")  # fails inside the actor
    report = rex.load("bad", bad, "cpu:0").result(timeout=60)
    assert not report.ok and "no-such-arch" in report.reason


def test_every_item_completes_once(rex):
    assert rex.load("noop-o", NOOP, "cpu:0").result(timeout=60).ok
    keys = [f"o{i}" for i in range(20)]
    for i, key in enumerate(keys):
        rex.submit(Batch(f"ob{i}", "noop-o", (item(key, "r4", key, {"x": i}),)))
    seen = wait_until(rex, all_done(keys))
    done = [e.result.idempotency_key for e in seen if isinstance(e, ItemCompleted)]
    assert sorted(done) == sorted(keys)
    assert rex.unload("noop-o").result(timeout=30) == 0
