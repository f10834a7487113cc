"""The hot routes (control/api/hot_routes.py) answer exactly as FastAPI does.

Two apps share one services bundle and one live runtime: one serves the inference routes
through HotRoutes (the default), the other with ``hot_routes=False`` (FastAPI alone). The same
calls, good and bad, must get the same status, the same error bodies and equivalent results;
the good ones must be answered by HotRoutes and the doubtful ones handed to FastAPI.
"""

from __future__ import annotations

import json
from typing import Annotated

import pytest
import pytest_asyncio
from fastapi import Depends, Query, Request

from control.api.app import create_app
from control.api.auth import Principal, require_tenant
from control.api.hot_routes import HotRoute, HotTable
from control.api.routes import openai
from control.api.schemas import inference as s
from control.api.settings import GatewayConfig
from tests.api.conftest import ADMIN_TOKEN, client_for
from tests.api.test_inference import live  # noqa: F401  (the module's live runtime)

pytestmark = [pytest.mark.slow]
#: The async tests share the module's event loop (the live runtime lives on it).
aio = pytest.mark.asyncio(loop_scope="module")

#: Fields that differ between two runs of the same call (ids, clocks).
VOLATILE = {"id", "created"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def both(live):  # noqa: F811
    """(hot app, plain FastAPI app, keys) over the same services and runtime."""
    hot_app, services, keys, _ = live
    assert hot_app.state.hot_routes is not None
    gw = hot_app.state.gateway
    plain = create_app(services, GatewayConfig(admin_token=ADMIN_TOKEN, sync_timeout_s=30,
                                               hot_routes=False),
                       spec_validator=gw.spec_validator, inference=gw.inference,
                       live_config=gw.live_config, metrics=gw.metrics)  # fmt: skip
    assert not hasattr(plain.state, "hot_routes")
    return hot_app, plain, keys


def _same(a, b) -> None:
    """Equal JSON bodies, ignoring run ids and creation times."""

    def strip(doc):
        if isinstance(doc, dict):
            return {k: strip(v) for k, v in doc.items() if k not in VOLATILE}
        if isinstance(doc, list):
            return [strip(v) for v in doc]
        return doc

    assert strip(a) == strip(b)


async def _both_ways(both, key: str | None, path: str, **kwargs):
    """The same call against each app: (hot response, plain response, served, handed over)."""
    hot_app, plain, keys = both
    token = {"acme": keys["acme"], "admin": ADMIN_TOKEN, None: None}.get(key, key)
    table = hot_app.state.hot_routes
    served, handed = table.served, table.handed_over
    async with client_for(hot_app, token) as c:
        a = await c.post(path, **kwargs)
    async with client_for(plain, token) as c:
        b = await c.post(path, **kwargs)
    return a, b, table.served - served, table.handed_over - handed


GOOD = [
    ("/v1/embeddings", {"model": "tiny-embed", "input": "one text"}),
    ("/v1/embeddings", {"model": "tiny-embed:1", "input": ["a b", "c"]}),
    ("/v1/completions", {"model": "tiny-gen", "prompt": "once", "max_tokens": 3}),
    ("/v1/chat/completions",
     {"model": "tiny-gen", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}),
    ("/v1/rerank", {"model": "tiny-rerank", "query": "q", "documents": ["a", "b"], "top_n": 1}),
]  # fmt: skip


@aio
@pytest.mark.parametrize(("path", "body"), GOOD, ids=[p for p, _ in GOOD])
async def test_good_calls_are_served_hot_with_fastapis_answer(both, path, body):
    a, b, served, handed = await _both_ways(both, "acme", path, json=body)
    assert (a.status_code, b.status_code) == (200, 200), (a.text, b.text)
    assert (served, handed) == (1, 0)
    _same(a.json(), b.json())  # greedy tiny models: the same outputs both ways
    assert a.headers["content-type"] == b.headers["content-type"] == "application/json"
    assert set(a.headers) == set(b.headers)
    if path == "/v1/embeddings":  # the run ids of the call, one per input, in order
        assert len(a.headers["x-legato-run-id"].split(",")) == len(a.json()["data"])


@aio
async def test_workflow_run_sync_and_async_are_served_hot(both):
    body = {"inputs": {"query": "q", "documents": ["a", "b"]}}
    a, b, served, _ = await _both_ways(both, "acme", "/v1/workflows/pipe/versions/1/runs",
                                       json=body)  # fmt: skip
    assert (a.status_code, b.status_code, served) == (200, 200, 1), a.text
    assert a.json()["status"] == b.json()["status"] == "succeeded"
    assert a.json()["outputs"] == b.json()["outputs"]
    a, b, served, _ = await _both_ways(both, "acme", "/v1/workflows/pipe/versions/1/runs",
                                       json={**body, "mode": "async"})  # fmt: skip
    assert (a.status_code, b.status_code, served) == (202, 202, 1)
    assert set(a.json()) == set(b.json())


BAD = [
    # (name, credential, path, request kwargs, status): FastAPI's answer, word for word
    ("no key", None, "/v1/embeddings", {"json": {"model": "tiny-embed", "input": "x"}}, 401),
    ("wrong key", "lg_nope_nope", "/v1/embeddings",
     {"json": {"model": "tiny-embed", "input": "x"}}, 401),
    ("admin token", "admin", "/v1/embeddings", {"json": {"model": "tiny-embed", "input": "x"}},
     403),
    ("invalid body", "acme", "/v1/embeddings", {"json": {"model": 3}}, 422),
    ("not an object", "acme", "/v1/embeddings", {"json": ["x"]}, 422),
    ("broken json", "acme", "/v1/embeddings",
     {"content": b"{nope", "headers": {"content-type": "application/json"}}, 422),
    ("broken json and no key", None, "/v1/embeddings",
     {"content": b"{nope", "headers": {"content-type": "application/json"}}, 422),
    ("empty body", "acme", "/v1/embeddings", {"headers": {"content-type": "application/json"}},
     422),
    ("text body", "acme", "/v1/embeddings",
     {"content": b"model=x", "headers": {"content-type": "text/plain"}}, 422),
    ("key too long", "acme", "/v1/embeddings",
     {"json": {"model": "tiny-embed", "input": "x"}, "headers": {"Idempotency-Key": "k" * 161}},
     422),
    ("unknown model", "acme", "/v1/embeddings", {"json": {"model": "missing", "input": "x"}},
     404),
    ("wrong task", "acme", "/v1/embeddings", {"json": {"model": "tiny-gen", "input": "x"}}, 422),
    ("too many inputs", "acme", "/v1/embeddings",
     {"json": {"model": "tiny-embed", "input": ["x"] * 65}}, 422),
    ("body too large", "acme", "/v1/embeddings",
     {"json": {"model": "tiny-embed", "input": "x" * 2_000_000}}, 413),
    ("path parameter too long", "acme", f"/v1/workflows/{'w' * 201}/versions/1/runs",
     {"json": {"inputs": {}}}, 422),
    ("unknown workflow", "acme", "/v1/workflows/nope/versions/1/runs",
     {"json": {"inputs": {}}}, 422),
    ("bad inputs", "acme", "/v1/workflows/pipe/versions/1/runs", {"json": {"inputs": "x"}}, 422),
]  # fmt: skip


@aio
@pytest.mark.parametrize(("credential", "path", "kwargs", "status"), [b[1:] for b in BAD],
                         ids=[b[0] for b in BAD])  # fmt: skip
async def test_bad_calls_get_fastapis_error_body(both, credential, path, kwargs, status):
    a, b, served, handed = await _both_ways(both, credential, path, **kwargs)
    assert (a.status_code, b.status_code) == (status, status), (a.text, b.text)
    assert a.json() == b.json()
    assert a.json()["detail"]
    assert served + handed <= 1  # the size limit refuses before either


@aio
async def test_validation_failures_are_handed_over_and_endpoint_errors_served(both):
    _, _, served, handed = await _both_ways(both, "acme", "/v1/embeddings",
                                            json={"model": 3})  # fmt: skip
    assert (served, handed) == (0, 1)  # FastAPI words the 422
    _, _, served, handed = await _both_ways(both, "acme", "/v1/embeddings",
                                            json={"model": "missing", "input": "x"})  # fmt: skip
    assert (served, handed) == (1, 0)  # the endpoint's 404, through the app's handler


@aio
async def test_idempotency_key_replays_and_conflicts_the_same_way(both):
    body = {"model": "tiny-embed", "input": "keyed"}
    for i, app in enumerate(both[:2]):
        async with client_for(app, both[2]["acme"]) as c:
            key = {"Idempotency-Key": f"hot-parity-{i}"}
            first = await c.post("/v1/embeddings", json=body, headers=key)
            again = await c.post("/v1/embeddings", json=body, headers=key)
            other = await c.post("/v1/embeddings", json={**body, "input": "x"}, headers=key)
        assert first.status_code == again.status_code == 200
        assert first.headers["x-legato-run-id"] == again.headers["x-legato-run-id"]
        assert other.status_code == 409 and other.json()["error"] == "idempotency_conflict"


@aio
async def test_streamed_chat_is_served_hot_as_events(both):
    msg = {"model": "tiny-gen", "messages": [{"role": "user", "content": "hi"}],
           "max_tokens": 3, "stream": True}  # fmt: skip
    hot_app, _, keys = both
    served = hot_app.state.hot_routes.served
    async with client_for(hot_app, keys["acme"]) as c:
        async with c.stream("POST", "/v1/chat/completions", json=msg) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = [ln async for ln in r.aiter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "data: [DONE]" and json.loads(lines[0][6:])["object"]
    assert hot_app.state.hot_routes.served == served + 1


@aio
async def test_metrics_label_hot_calls_by_their_route_template(both):
    hot_app, _, keys = both
    async with client_for(hot_app, keys["acme"]) as c:
        await c.post("/v1/workflows/pipe/versions/1/runs",
                     json={"inputs": {"query": "q", "documents": ["a"]}, "mode": "async"})  # fmt: skip
    async with client_for(hot_app, ADMIN_TOKEN) as c:
        text = (await c.get("/metrics")).text
    assert 'route="/v1/workflows/{name}/versions/{version}/runs",status="202"' in text
    assert 'route="/v1/embeddings",status="200"' in text


def test_unsupported_endpoint_shapes_are_refused_when_the_app_is_built():
    async def with_query(
        request: Request, body: s.EmbeddingsCreate,
        who: Annotated[Principal, Depends(require_tenant)], n: Annotated[int, Query()] = 1,
    ) -> s.EmbeddingList: ...  # fmt: skip

    with pytest.raises(ValueError, match="parameter 'n'"):
        HotTable([HotRoute("/v1/x", with_query)])
    with pytest.raises(ValueError, match="path parameters"):
        HotTable([HotRoute("/v1/x/{name}", openai.embeddings)])


def test_table_matches_exact_and_templated_paths():
    from control.api.routes import runs

    table = HotTable([HotRoute("/v1/embeddings", openai.embeddings),
                      HotRoute("/v1/workflows/{name}/versions/{version}/runs", runs.create_run)])  # fmt: skip
    assert table.match("/v1/embeddings")[0].path == "/v1/embeddings"
    plan, params = table.match("/v1/workflows/rag/versions/2/runs")
    assert plan is not None and params == {"name": "rag", "version": "2"}
    assert table.match("/v1/workflows/rag/versions/2/runs/x") == (None, {})
    assert table.match("/v1/embeddings/") == (None, {})
