"""The request timeline of real runs through the real gateway, the live runtime and a real worker
with a tiny embedder (issue 25, item 5): the spans add up with the run's end-to-end time, the
routing decision carries the candidates' scores, and the same spans reach an OTLP collector
(a receiver on 127.0.0.1 decoding the protobuf requests) as one trace per run, one span per step.

The core binds steps late here, as it does by default; a step whose placement does not matter is
then bound without a routing choice, and the live runtime's ``BindingConfig.explain`` scores the
replicas after the fact, so its decision still shows the candidates.
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio
import torch

from control.services.run_tracing import RunTracer
from control.wiring.live import serving_core_config
from tests.support.live_gateway import embed_clients, live_world, seed_embed_fleet
from tests.support.otlp_receiver import otlp_receiver

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

PIPELINE = {
    "inputs": {"doc": "text"},
    "outputs": {"vectors": "emb.embedding"},
    "nodes": [{"id": "split", "tool": "segment", "params": {"max_chars": 40}},
              {"id": "emb", "task": "embed", "model": "tiny-embed:1", "map_over": "text"}],
    "edges": [{"from": "input.doc", "to": "split.text"},
              {"from": "split.segments", "to": "emb.text"}],
}  # fmt: skip
DOC = "The first sentence is here. The second one follows it."
#: Slack (ms) between the runtime's end-to-end time and the row's (the row's instants are
#: taken around the runtime's: acceptance before submission, the commit after the end).
SLACK_MS = 50.0


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, _sqlite_template):
    world = live_world(tmp_path_factory.mktemp("timeline"), _sqlite_template, ("bert",))
    seed_embed_fleet(world.services)
    world.services.workflows.create("test", name="pipe", version="1", spec=PIPELINE,
                                    status="active")  # fmt: skip
    with otlp_receiver() as (url, received):
        tracer = RunTracer(url, "legato-test")
        clients = embed_clients(
            world, also_settled=tracer.on_settled, core_config=serving_core_config()
        )
        async with clients as (client, admin):
            yield client, admin, tracer, received
        tracer.close()


def _attr(span, key: str) -> object:
    value = next(a.value for a in span.attributes if a.key == key)
    return getattr(value, value.WhichOneof("value"))


async def _run(client, doc: str = DOC) -> str:
    r = await client.post("/v1/workflows/pipe/versions/1/runs",
                          json={"inputs": {"doc": doc}, "mode": "sync"})  # fmt: skip
    assert r.status_code == 200, r.text
    return r.json()["id"]


async def test_spans_add_up_to_the_runs_end_to_end_time(live):
    client, admin, _, _ = live
    run_id = await _run(client)
    r = await admin.get(f"/admin/requests/{run_id}/timeline")
    assert r.status_code == 200, r.text
    t = r.json()
    assert t["recorded"] and t["status"] == "succeeded"
    nodes = sorted(s["node"] for s in t["spans"])
    assert nodes == ["emb", "emb", "split"]  # the tool, then one embed span per chunk
    total = t["total_ms"]
    assert 0 < total <= t["latency_ms"] + SLACK_MS
    for s in t["spans"]:
        assert 0 <= s["ready_ms"] <= s["dispatched_ms"] <= s["end_ms"] <= total
        parts = s["queue_ms"] + s["batch_wait_ms"] + s["transfer_ms"] + s["device_ms"]
        assert parts == pytest.approx(s["end_ms"] - s["ready_ms"], abs=0.01)
        assert s["device"] and s["batch_size"] >= 1 and s["ok"]
    embeds = [s for s in t["spans"] if s["node"] == "emb"]
    assert all(s["device"] == "cpu:0" and s["replica"] and s["device_ms"] > 0 for s in embeds)
    split = next(s for s in t["spans"] if s["node"] == "split")
    assert split["end_ms"] <= min(s["ready_ms"] for s in embeds)  # the pipeline's order
    where = t["where"]
    assert sum(where["totals"].values()) == pytest.approx(
        sum(s["end_ms"] - s["ready_ms"] for s in t["spans"]) + where["totals"]["outside_ms"],
        abs=0.05,
    )
    assert "dominated" in where["summary"]


async def test_the_routing_decision_carries_the_candidates_scores(live):
    client, admin, _, _ = live
    run_id = await _run(client)
    t = (await admin.get(f"/admin/requests/{run_id}/timeline")).json()
    kinds = [d["kind"] for d in t["decisions"]]
    assert kinds[0] == "admission" and t["decisions"][0]["verdict"] == "admitted"
    routes = [d for d in t["decisions"] if d["kind"] == "route" and d["node"] == "emb"]
    assert routes, t["decisions"]
    for d in routes:
        assert d["candidates"] and d["candidates"][0]["replica"] == d["replica"]
        best = d["candidates"][0]
        assert best["total_us"] > 0 and best["service_us"] > 0
        assert "lowest predicted completion" in d["reason"] or "bound late" in d["reason"]
    tool = next(d for d in t["decisions"] if d["kind"] == "route" and d["node"] == "split")
    assert tool["replica"] is None and "host tool" in tool["reason"]


async def test_otlp_gets_one_trace_per_run_and_one_span_per_step(live):
    client, admin, tracer, received = live
    ids = [await _run(client, DOC), await _run(client, "One sentence only.")]
    timelines = [(await admin.get(f"/admin/requests/{i}/timeline")).json() for i in ids]
    tracer.provider.force_flush()
    for _ in range(50):  # the batch processor's thread posts them: wait for it
        traces = {bytes(k): v for k, v in received.by_trace().items()}
        runs = {_attr(s, "legato.run_id"): (k, spans) for k, spans in traces.items()
                for s in spans if s.name.startswith("run ")}  # fmt: skip
        if all(i in runs for i in ids):
            break
        await asyncio.sleep(0.1)
    assert all(service == "legato-test" for service, _ in received.spans)
    for run_id, t in zip(ids, timelines, strict=True):
        _, spans = runs[run_id]
        root = next(s for s in spans if s.name.startswith("run "))
        steps = [s for s in spans if s is not root]
        assert len(steps) == len(t["spans"])  # one span per step attempt
        assert all(s.parent_span_id == root.span_id for s in steps)
        assert sorted(s.name for s in steps) == sorted(f"step {x['node']}" for x in t["spans"])
        for s in steps:
            assert root.start_time_unix_nano <= s.start_time_unix_nano <= s.end_time_unix_nano
            assert s.end_time_unix_nano <= root.end_time_unix_nano
            attrs = {a.key for a in s.attributes}
            assert {"legato.tenant_id", "legato.workflow", "legato.node", "legato.device",
                    "legato.replica", "legato.queue_wait_ms", "legato.batch_size",
                    "legato.attempt", "legato.decision"} <= attrs  # fmt: skip
        took_ms = (root.end_time_unix_nano - root.start_time_unix_nano) / 1e6
        assert took_ms == pytest.approx(t["total_ms"], abs=1.0)
