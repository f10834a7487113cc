"""Inference through the real app, the real core, the live runtime and a real executor with
tiny models: workflow runs (sync, async + long-poll, SSE, WebSocket), the OpenAI-compatible
routes, idempotency under concurrent duplicates, 429 with Retry-After, billing sums."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import pytest_asyncio
import torch

from control.api.settings import GatewayConfig
from control.executor.protocol import ModelRef
from tests.api.conftest import ADMIN_TOKEN, client_for
from tests.support.live_gateway import live_app, live_world

torch.set_num_threads(1)
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.slow]

REFS = {
    "tiny-embed:1": ModelRef("tiny-embed:1", "embed", "tiny", "bert"),
    "tiny-rerank:1": ModelRef("tiny-rerank:1", "rerank", "tiny", "bert"),
    "tiny-gen:1": ModelRef("tiny-gen:1", "generate", "tiny", "gpt2"),
}
PIPE = {
    "inputs": {"query": "text", "documents": "documents"},
    "outputs": {"answer": "gen.text", "ranked": "rerank.documents"},
    "nodes": [{"id": "rerank", "task": "rerank", "model": "tiny-rerank:1"},
              {"id": "gen", "task": "generate", "model": "tiny-gen:1",
               "params": {"max_tokens": 5}}],
    "edges": [{"from": "input.query", "to": "rerank.query"},
              {"from": "input.documents", "to": "rerank.documents"},
              {"from": "input.query", "to": "gen.prompt"},
              {"from": "rerank.documents", "to": "gen.context"}],
}  # fmt: skip


# The same DAG, but the generate step reads its prompt from its own input: a non-text prompt
# makes that step fail after the rerank step has run.
PIPE_FRAGILE = {
    **PIPE,
    "inputs": {**PIPE["inputs"], "prompt": "text"},
    "edges": [*PIPE["edges"][:2], {"from": "input.prompt", "to": "gen.prompt"}, PIPE["edges"][3]],
}


def _seed(services) -> dict[str, int]:
    node = services.nodes.create("test", name="local")
    services.devices.create("test", name="cpu:0", node_id=node.id, kind="cpu", memory_mib=2048,
                            precisions=["fp32"], is_real=True)  # fmt: skip
    for key, ref in REFS.items():
        name, version = key.split(":")
        services.models.create("test", name=name, version=version, task=ref.task,
                               weights_source="declared", weights_location="tiny test model",
                               memory_mib=16, max_batch_size=8, max_batch_tokens=4096)  # fmt: skip
    services.workflows.create("test", name="pipe", version="1", spec=PIPE, status="active")
    services.workflows.create("test", name="fragile", version="1", spec=PIPE_FRAGILE,
                              status="active")  # fmt: skip
    services.models.create("test", name="big-llm", version="1", task="generate",
                           weights_source="declared", weights_location="twin only",
                           memory_mib=140_000)  # fmt: skip
    twin_only = {"inputs": {"prompt": "text"}, "outputs": {"text": "g.text"},
                 "nodes": [{"id": "g", "task": "generate", "model": "big-llm:1"}],
                 "edges": [{"from": "input.prompt", "to": "g.prompt"}]}  # fmt: skip
    services.workflows.create("test", name="twin-only", version="1", spec=twin_only,
                              status="active")  # fmt: skip
    ids = {}
    for name in ("acme", "globex", "tight"):
        ids[name] = services.tenants.create("test", name=name, weight=1).id
    services.quotas.create("test", tenant_id=ids["tight"], resource="requests_per_min",
                           nominal=1, borrowing_limit=0, lending_limit=0)  # fmt: skip
    return ids


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory, module_db_url):
    world = live_world(tmp_path_factory.mktemp("live"), module_db_url)
    services = world.services
    ids = _seed(services)
    keys = {n: services.api_keys.create_key("test", i).plaintext for n, i in ids.items()}
    app = live_app(world, REFS, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=30))
    inference = app.state.gateway.inference
    await inference.start()
    yield app, services, keys, ids
    await inference.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def acme(live):
    async with client_for(live[0], live[2]["acme"]) as client:
        yield client


async def test_embeddings_route_runs_a_one_node_workflow_and_bills_it(live, acme):
    r = await acme.post("/v1/embeddings", json={"model": "tiny-embed", "input": ["a b c", "d"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [d["index"] for d in body["data"]] == [0, 1]
    assert all(len(d["embedding"]) == 32 for d in body["data"])  # tiny BERT hidden size
    assert body["usage"]["prompt_tokens"] > 0
    usage = (await acme.get("/v1/usage")).json()
    assert usage["totals"]["input_tokens"] >= body["usage"]["prompt_tokens"]


async def test_sync_embedding_is_recorded_in_one_commit(live, acme):
    """A synchronous call without an idempotency key: its request row, its ledger entry and
    its end share ONE commit (the one on the caller's path), and all three are stored by the
    time the caller has its answer."""
    inference = live[0].state.gateway.inference
    await inference.writer.flush()
    before = inference.writer.commits
    r = await acme.post("/v1/embeddings", json={"model": "tiny-embed", "input": "one commit"})
    assert r.status_code == 200, r.text
    assert inference.writer.commits - before == 1
    run_id = r.headers["x-legato-run-id"]
    stored = live[1].requests.get(run_id)
    assert stored.status == "succeeded" and stored.result["outputs"]["embedding"]
    assert [e.node_id for e in live[1].usage.list() if e.request_id == run_id] == ["embed"]


async def test_async_run_is_stored_before_its_id_is_returned(acme):
    """An async run's id is handed out only once its row is committed: a plain GET (which
    reads the database) finds it at once."""
    body = {"inputs": {"query": "q", "documents": ["d1", "d2"]}, "mode": "async"}
    r = await acme.post("/v1/workflows/pipe/versions/1/runs", json=body)
    assert r.status_code == 202
    found = await acme.get(f"/v1/runs/{r.json()['id']}")
    assert found.status_code == 200, found.text


async def test_workflow_sync_async_longpoll_and_other_tenant(live, acme):
    body = {"inputs": {"query": "where is Paris", "documents": ["Paris is in France", "dogs"]}}
    r = await acme.post("/v1/workflows/pipe/versions/1/runs", json=body)
    assert r.status_code == 200, r.text
    run = r.json()
    assert run["status"] == "succeeded" and isinstance(run["outputs"]["answer"], str)
    assert sorted(run["outputs"]["ranked"]) == sorted(body["inputs"]["documents"])
    assert run["usage"]["output_tokens"] > 0
    r = await acme.post("/v1/workflows/pipe/versions/1/runs", json={**body, "mode": "async"})
    assert r.status_code == 202
    run_id = r.json()["id"]
    r = await acme.get(f"/v1/runs/{run_id}", params={"wait": 20})
    assert r.json()["status"] == "succeeded"
    async with client_for(live[0], live[2]["globex"]) as globex:
        assert (await globex.get(f"/v1/runs/{run_id}")).status_code == 404
        assert (await globex.get("/v1/usage", params={"request_id": run_id})).status_code == 404


async def test_validation_errors_of_inference_routes(acme):
    cases = [
        ("/v1/workflows/nope/versions/1/runs", {"inputs": {}}, 422),
        ("/v1/workflows/pipe/versions/1/runs", {"inputs": "x"}, 422),
        ("/v1/embeddings", {"model": "missing", "input": "x"}, 404),
        ("/v1/embeddings", {"model": "tiny-gen", "input": "x"}, 422),
        ("/v1/chat/completions", {"model": "tiny-gen", "messages": []}, 422),
        ("/v1/rerank", {"model": "tiny-rerank", "query": "q", "documents": []}, 422),
    ]
    for path, body, status in cases:
        r = await acme.post(path, json=body)
        assert r.status_code == status, (path, r.text)
        assert r.json()["detail"]


async def test_chat_completion_and_stream(acme):
    msg = {"model": "tiny-gen", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    r = await acme.post("/v1/chat/completions", json=msg)
    assert r.status_code == 200, r.text
    full = r.json()
    assert full["object"] == "chat.completion" and full["usage"]["completion_tokens"] > 0
    async with acme.stream("POST", "/v1/chat/completions", json={**msg, "stream": True}) as s:
        assert s.headers["content-type"].startswith("text/event-stream")
        lines = [ln async for ln in s.aiter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(ln[6:]) for ln in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    # the tiny random model rarely stops on its own: "length" exactly when it used all 4
    reason = "length" if full["usage"]["completion_tokens"] >= 4 else "stop"
    assert full["choices"][0]["finish_reason"] == reason
    assert chunks[-1]["choices"][0]["finish_reason"] == reason
    assert text == full["choices"][0]["message"]["content"]  # greedy: same text both ways


async def test_completion_sampling_reaches_the_model_and_length_is_reported(acme):
    """temperature/top_p are part of the request (a different body from the greedy one) and
    a completion cut at max_tokens says "length"."""
    base = {"model": "tiny-gen", "prompt": "once upon a time", "max_tokens": 2}
    r = await acme.post("/v1/completions", json=base)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 2
    assert r.json()["choices"][0]["finish_reason"] == "length"
    sampled = await acme.post("/v1/completions",
                              json={**base, "temperature": 1.5, "top_p": 0.5})  # fmt: skip
    assert sampled.status_code == 200, sampled.text
    bad = await acme.post("/v1/completions", json={**base, "top_p": 0})
    assert bad.status_code == 422


async def test_stop_seed_and_n_are_honoured_or_refused_never_ignored(acme):
    """Issue 24, item 1: ``stop`` ends the text before the first stop string ("stop"),
    ``seed`` makes a sampled completion repeatable, ``n`` above 1 is a 422 naming it (all
    three used to be dropped without a word)."""
    base = {"model": "tiny-gen", "prompt": "the quick brown fox", "max_tokens": 12}
    greedy = await acme.post("/v1/completions", json=base)
    assert greedy.status_code == 200, greedy.text
    text = greedy.json()["choices"][0]["text"]
    assert len(text) >= 4, text  # 12 tokens of the tiny GPT-2 decode to some text
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    cut = await acme.post("/v1/completions", json={**base, "stop": [stop, "\u2603never"]})
    assert cut.status_code == 200, cut.text
    choice = cut.json()["choices"][0]
    assert choice["text"] == text[: text.find(stop)] and choice["finish_reason"] == "stop"
    sampled = {**base, "temperature": 1.5, "seed": 7}
    first, again = [(await acme.post("/v1/completions", json=sampled)).json() for _ in range(2)]
    assert first["choices"][0]["text"] == again["choices"][0]["text"]
    many = await acme.post("/v1/completions", json={**base, "n": 2})
    assert many.status_code == 422 and "n=2: only one choice" in many.text, many.text
    too_many = await acme.post("/v1/completions", json={**base, "stop": list("abcde")})
    assert too_many.status_code == 422 and "stop" in too_many.text


async def test_completions_rerank_and_models(acme):
    r = await acme.post(
        "/v1/completions", json={"model": "tiny-gen:1", "prompt": "x", "max_tokens": 3}
    )
    assert r.status_code == 200 and r.json()["choices"][0]["text"] is not None
    docs = ["alpha", "beta", "gamma"]
    r = await acme.post("/v1/rerank", json={"model": "tiny-rerank", "query": "q", "documents": docs,
                                             "top_n": 2})  # fmt: skip
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert len(results) == 2 and all(docs[x["index"]] == x["document"]["text"] for x in results)
    ids = {m["id"] for m in (await acme.get("/v1/models")).json()["data"]}
    assert ids == set(REFS)  # the declared-only big-llm:1 is not offered here


async def test_sse_events_of_a_run(acme):
    body = {"inputs": {"query": "q", "documents": ["a", "b"]}, "mode": "stream"}
    async with acme.stream("POST", "/v1/workflows/pipe/versions/1/runs", json=body) as s:
        raw = "".join([chunk async for chunk in s.aiter_text()])
    events = [block.split("\n") for block in raw.strip().split("\n\n")]
    kinds = [e[0].removeprefix("event: ") for e in events]
    assert kinds[-1] == "result" and set(kinds[:-1]) <= {"token"}
    result = json.loads(events[-1][1].removeprefix("data: "))
    tokens = "".join(json.loads(e[1][6:])["text"] for e in events[:-1])
    assert result["status"] == "succeeded" and tokens == result["outputs"]["answer"]


async def test_websocket_runs(live):
    import uvicorn
    import websockets

    app, _, keys, _ = live
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        url = f"ws://127.0.0.1:{port}/v1/runs/ws"
        async with websockets.connect(
            url, additional_headers={"Authorization": f"Bearer {keys['acme']}"}
        ) as ws:
            await ws.send(json.dumps({"workflow": "pipe", "version": "1",
                                      "inputs": {"query": "q", "documents": ["a"]}}))  # fmt: skip
            seen = []
            while not seen or seen[-1]["type"] not in ("result", "error"):
                seen.append(json.loads(await ws.recv()))
        assert seen[0]["type"] == "accepted" and seen[-1]["run"]["status"] == "succeeded"
        async with websockets.connect(
            url, additional_headers={"Authorization": "Bearer bad"}
        ) as ws:
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd.code == 1008
    finally:
        server.should_exit = True
        await task


async def test_concurrent_duplicates_run_once_and_bill_once(live, acme):
    services = live[1]
    body = {"model": "tiny-embed", "input": "same text"}
    headers = {"Idempotency-Key": "dup-1"}
    replies = await asyncio.gather(*(acme.post("/v1/embeddings", json=body, headers=headers)
                                     for _ in range(6)))  # fmt: skip
    assert {r.status_code for r in replies} == {200}
    vectors = {json.dumps(r.json()["data"][0]["embedding"]) for r in replies}
    assert len(vectors) == 1
    runs = [q for q in services.requests.list() if q.idempotency_key == "dup-1#0"]
    assert len(runs) == 1
    assert len(services.usage.list(request_id=runs[0].id)) == 1
    r = await acme.post("/v1/embeddings", json={**body, "input": "other"}, headers=headers)
    assert r.status_code == 409 and r.json()["error"] == "idempotency_conflict"


async def test_quota_rejection_is_429_with_retry_after(live):
    async with client_for(live[0], live[2]["tight"]) as tight:
        body = {"model": "tiny-embed", "input": "x"}
        first = await tight.post("/v1/embeddings", json=body)
        second = await tight.post("/v1/embeddings", json=body)
        keyed = {"Idempotency-Key": "after-429"}
        third = await tight.post("/v1/embeddings", json=body, headers=keyed)
        fourth = await tight.post("/v1/embeddings", json=body, headers=keyed)
    assert first.status_code == 200, first.text
    assert second.status_code == 429, second.text
    assert int(second.headers["Retry-After"]) >= 1
    assert "tight" in second.json()["detail"]
    # A refused request does not spend its key: the retry is a new request (refused again
    # here, as the quota has not refilled), and nothing was billed for either.
    assert third.status_code == fourth.status_code == 429
    retried = [
        q for q in live[1].requests.list() if (q.idempotency_key or "").startswith("after-429")
    ]
    assert sorted(q.idempotency_key for q in retried) == ["after-429#0", "after-429#0~retry1"]
    assert all(live[1].usage.list(request_id=q.id) == [] for q in retried)


async def test_usage_sums_equal_ledger_sums(live):
    services = live[1]
    async with client_for(live[0], ADMIN_TOKEN) as admin:
        report = (await admin.get("/admin/usage", params={"limit": 1000})).json()
        snap = await admin.get("/admin/snapshot")
        metrics = (await admin.get("/metrics")).text
    assert 'legato_billed_tokens_total{direction="input",tenant="acme"}' in metrics
    assert "legato_batch_size_bucket" in metrics  # the runtime's registry is served too
    ledger = services.usage.totals()
    assert {k: report["totals"][k] for k in ledger} == ledger
    assert report["totals"]["entries"] == len(services.usage.list())
    for name, tenant_id in live[3].items():
        mine = [e for e in services.usage.list()
                if services.requests.get(e.request_id).tenant_id == tenant_id]  # fmt: skip
        async with client_for(live[0], live[2][name]) as client:
            totals = (await client.get("/v1/usage")).json()["totals"]
        assert totals["cost_units"] == sum(e.cost_units for e in mine)
        assert totals["output_tokens"] == sum(e.output_tokens for e in mine)
    assert snap.status_code == 200 and snap.json()["devices"][0]["device_id"] == "cpu:0"
    tenancy = snap.json()["tenancy"]["tenants"]  # the console's fair-share page reads these
    assert {"acme", "globex", "tight"} <= {t["tenant_id"] for t in tenancy}
    assert all({"weight", "queued_steps", "in_flight_runs"} <= set(t) for t in tenancy)


async def test_loadgen_replays_a_trace_as_several_tenants(live):
    from control.services import loadgen as lg

    app, _, keys, _ = live
    config = lg.LoadConfig(trace="azure", route="embeddings", model="tiny-embed",
                           rate_factor=200.0, max_requests=8)  # fmt: skip
    calls = lg.plan_calls(config, lg.arrivals(config, ["acme", "globex"]))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        outcomes = await lg.run_load(client, calls, keys, timeout_s=30)
    rows = {r.tenant: r for r in lg.summarise(outcomes, wall_s=1.0)}
    assert rows["acme"].ok == rows["globex"].ok == 4 and rows["all"].errors == 0


async def test_sync_timeout_is_504_and_the_run_is_cancelled(acme):
    """The caller gave up: its run is cancelled so that it holds no quota (issue 22)."""
    body = {"inputs": {"query": "q", "documents": ["a", "b"]}, "timeout_s": 0.001}
    r = await acme.post("/v1/workflows/pipe/versions/1/runs", json=body)
    assert r.status_code == 504, r.text
    run_id = r.json()["detail"].split()[1]
    later = await acme.get(f"/v1/runs/{run_id}", params={"wait": 30})
    assert later.json()["status"] == "cancelled"


async def test_failed_run_is_billed_only_for_completed_steps(live, acme):
    services = live[1]
    # a prompt of the declared type (so submission accepts it) longer than the tiny GPT-2's
    # 512 positions: only the model can tell, after the rerank step has run and been billed
    body = {"inputs": {"query": "q", "documents": ["a", "b"], "prompt": "word " * 700}}
    r = await acme.post("/v1/workflows/fragile/versions/1/runs", json=body)
    # an input the model cannot take is the caller's to fix (issue 22): 422 naming it, not 502
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "inputs.prompt" and r.json()["error"] == "bad_input"
    run_id = r.json()["detail"].split()[1]
    run = (await acme.get(f"/v1/runs/{run_id}")).json()
    assert run["status"] == "failed" and run["error"]
    billed = services.usage.list(request_id=run_id)
    assert [e.node_id for e in billed] == ["rerank"]
    assert run["usage"]["input_tokens"] == billed[0].input_tokens


async def test_runs_keep_each_nodes_output_and_time(live, acme):
    body = {"inputs": {"query": "where is Paris", "documents": ["Paris is in France", "dogs"]}}
    run = (await acme.post("/v1/workflows/pipe/versions/1/runs", json=body)).json()
    nodes = run["nodes"]
    assert set(nodes) == {"rerank", "gen"}
    assert nodes["gen"]["outputs"]["text"] == run["outputs"]["answer"]
    assert nodes["rerank"]["outputs"]["documents"] == run["outputs"]["ranked"]
    assert nodes["rerank"]["done_ms"] <= nodes["gen"]["done_ms"]  # gen reads rerank's output
    billed = {e.node_id: e for e in live[1].usage.list(request_id=run["id"])}
    for node_id, view in nodes.items():
        assert view["device_ms"] == billed[node_id].device_ms
        assert view["input_tokens"] == billed[node_id].input_tokens


async def test_admin_test_run_on_behalf_of_a_tenant_is_audited_and_billed_to_it(live):
    services, ids = live[1], live[3]
    body = {"tenant_id": ids["globex"], "inputs": {"query": "q", "documents": ["a", "b"]}}
    async with client_for(live[0], ADMIN_TOKEN) as admin:
        r = await admin.post("/admin/workflows/pipe/versions/1/test-runs", json=body)
        assert r.status_code == 200, r.text
        run = r.json()
        usage = (await admin.get("/admin/usage", params={"request_id": run["id"]})).json()
        audit = (await admin.get("/admin/audit", params={"action": "test_run"})).json()
        missing = await admin.post("/admin/workflows/pipe/versions/1/test-runs",
                                   json={**body, "tenant_id": 999_999})  # fmt: skip
    assert set(run["nodes"]) == {"rerank", "gen"} and run["status"] == "succeeded"
    assert services.requests.get(run["id"]).tenant_id == ids["globex"]
    assert {(e["tenant_id"], e["tenant_name"]) for e in usage["items"]} == {
        (ids["globex"], "globex")
    }
    assert [a["entity_id"] for a in audit["items"]] == [run["id"]]
    assert audit["items"][0]["actor"] == "admin"
    assert missing.status_code == 404


async def test_admin_changes_reach_the_live_core_without_a_restart(live):
    app, services, keys, ids = live
    spec = {"inputs": {"text": "text"}, "outputs": {"vec": "e.embedding"},
            "nodes": [{"id": "e", "task": "embed", "model": "tiny-embed:1"}],
            "edges": [{"from": "input.text", "to": "e.text"}]}  # fmt: skip
    async with client_for(app, ADMIN_TOKEN) as admin, client_for(app, keys["globex"]) as globex:
        made = await admin.post("/admin/workflows", json={"name": "fresh", "version": "1",
                                                          "spec": spec, "status": "active"})  # fmt: skip
        assert made.status_code == 201, made.text
        assert made.headers["X-Legato-Live-Config"].startswith("applied")
        ran = await globex.post("/v1/workflows/fresh/versions/1/runs",
                                json={"inputs": {"text": "hello"}})  # fmt: skip
        assert ran.status_code == 200, ran.text
        assert len(ran.json()["outputs"]["vec"]) == 32
        await admin.delete(f"/admin/workflows/{made.json()['id']}")
        gone = await globex.post("/v1/workflows/fresh/versions/1/runs",
                                 json={"inputs": {"text": "hello"}})  # fmt: skip
        assert gone.status_code == 422 and "retired" in gone.json()["detail"]
        quota = {"tenant_id": ids["globex"], "resource": "requests_per_min", "nominal": 0,
                 "borrowing_limit": 0, "lending_limit": 0}  # fmt: skip
        q = await admin.post("/admin/quotas", json=quota)
        assert q.headers["X-Legato-Live-Config"].startswith("applied"), q.headers
        refused = await globex.post("/v1/embeddings", json={"model": "tiny-embed", "input": "x"})
        assert refused.status_code == 429, refused.text
        await admin.delete(f"/admin/quotas/{q.json()['id']}")
        again = await globex.post("/v1/embeddings", json={"model": "tiny-embed", "input": "x"})
        assert again.status_code == 200, again.text


async def test_snapshot_shows_rollout_and_recent_runs(live):
    async with client_for(live[0], ADMIN_TOKEN) as admin:
        snap = (await admin.get("/admin/snapshot")).json()
    assert "rollout" in snap and "pending" in snap and "cold_starts" in snap
    recent = snap["recent_runs"]
    assert recent and recent[0]["finished_at"] >= recent[-1]["finished_at"]
    assert {r["status"] for r in recent} <= {"succeeded", "failed", "rejected", "cancelled"}


async def test_workflow_the_live_fleet_cannot_run_is_503_and_not_recorded(live, acme):
    before = len(live[1].requests.list())
    r = await acme.post("/v1/workflows/twin-only/versions/1/runs", json={"inputs": {"prompt": "x"}})
    assert r.status_code == 503 and "twin-only:1" in r.json()["detail"]
    assert len(live[1].requests.list()) == before
