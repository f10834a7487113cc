"""Every bad input that the issue's bad-input battery answered with an HTTP 500 (or a reset
connection, or a 400 where 413 is due) is a clear 4xx with a JSON body naming the field or the
limit, and changes nothing; a WebSocket's non-JSON first message gets an error and a close
frame with a reason; a local model folder outside the source roots is a 422 naming the roots.

The real app over a real (SQLite) database; no live runtime is needed: the edge refuses these
before anything runs.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from control.api.json_guard import MAX_JSON_DEPTH
from control.api.settings import GatewayConfig
from tests.api.conftest import ADMIN_TOKEN, Stack, build_stack, client_for

LIMIT = 1 << 20  # the product's default max_body_bytes
DEEP = 5000


@pytest.fixture(scope="module")
def edge(tmp_path_factory, _sqlite_template) -> Iterator[tuple[Stack, str, Path]]:
    root = tmp_path_factory.mktemp("edge")
    models = root / "models"
    (models / "good").mkdir(parents=True)
    (models / "to-etc").symlink_to("/etc")
    config = GatewayConfig(admin_token=ADMIN_TOKEN, max_body_bytes=LIMIT)
    stack = build_stack(root / "legato.db", _sqlite_template, config=config,
                        model_source_roots=[models])  # fmt: skip
    tenant = stack.services.tenants.create("test", name="acme")
    key = stack.services.api_keys.create_key("test", tenant.id).plaintext
    yield stack, key, models
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
async def admin(edge) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(edge[0].app, ADMIN_TOKEN) as client:
        yield client


@pytest.fixture
async def tenant(edge) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(edge[0].app, edge[1]) as client:
        yield client


def _refused(r: httpx.Response, status: int, error: str, field: str | None = None) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == error, body
    if field is not None:
        assert body["field"] == field, body
    return body


# -- dates ---------------------------------------------------------------------------------------


async def test_naive_and_date_only_times_on_audit_and_usage_are_read_as_utc(admin, tenant):
    r = await admin.post("/admin/nodes", json={"name": "dated"})
    assert r.status_code == 201, r.text
    at = r.json()["created_at"][:10]  # the day of the audit record, in UTC
    for since in (f"{at}T00:00:00", at, "2000-01-01"):  # naive, date-only: UTC midnight
        r = await admin.get("/admin/audit", params={"since": since, "entity_type": "node"})
        assert r.status_code == 200, r.text
        assert any((x["after"] or {}).get("name") == "dated" for x in r.json()["items"])
    r = await admin.get("/admin/audit", params={"since": "9999-01-01", "entity_type": "node"})
    assert r.status_code == 200 and r.json()["total"] == 0
    for path, client in (("/v1/usage", tenant), ("/admin/usage", admin)):
        for value in ("2026-01-01T00:00:00", "2026-01-01"):
            r = await client.get(path, params={"since": value, "until": value})
            assert r.status_code == 200, (path, value, r.text)


@pytest.mark.parametrize("param,value", [
    ("since", "0001-01-01T00:00:00+01:00"),  # before year 1 in UTC
    ("until", "9999-12-31T23:59:59-01:00"),  # after year 9999 in UTC
])  # fmt: skip
async def test_times_outside_years_1_to_9999_in_utc_are_422_naming_the_field(
    admin, tenant, param, value
):
    for path, client in (("/v1/usage", tenant), ("/admin/usage", admin), ("/admin/audit", admin)):
        body = _refused(await client.get(path, params={param: value}), 422, "invalid_request",
                        f"query.{param}")  # fmt: skip
        assert "1-9999" in body["detail"], body
    for edge_value in ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999+00:00"):
        r = await admin.get("/admin/audit", params={param: edge_value})
        assert r.status_code == 200, r.text


# -- JSON depth ----------------------------------------------------------------------------------


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("path,template", [
    ("/v1/workflows/pipe/versions/1/runs", '{"inputs": {"query": %s}}'),
    ("/v1/embeddings", '{"model": "m", "input": %s}'),
    ("/admin/nodes", '{"name": "deep", "labels": {"zone": %s}}'),
])  # fmt: skip
async def test_json_nested_5000_levels_is_422_naming_the_limit(edge, path, template):
    token = ADMIN_TOKEN if path.startswith("/admin") else edge[1]
    async with client_for(edge[0].app, token) as client:
        before = (await client.get("/admin/nodes")).json() if token == ADMIN_TOKEN else None
        r = await client.post(path, content=template % _deep(DEEP),
                              headers={"content-type": "application/json"})  # fmt: skip
        body = _refused(r, 422, "json_too_deep", "body")
        assert str(MAX_JSON_DEPTH) in body["detail"]
        if before is not None:
            assert (await client.get("/admin/nodes")).json()["total"] == before["total"]


async def test_json_within_the_depth_limit_passes(admin):
    labels = '{"name": "nested-ok", "labels": {"a": ' + _deep(MAX_JSON_DEPTH - 3) + "}}"
    r = await admin.post("/admin/nodes", content=labels,
                         headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code == 201, r.text


# -- text that cannot be encoded -----------------------------------------------------------------


@pytest.mark.parametrize("raw", [b'"x\\ud800y"', b'"\\uDC00"', b'"x\xed\xa0\x80"'])
async def test_lone_surrogate_in_a_node_label_is_422_naming_the_field(admin, raw):
    before = (await admin.get("/admin/nodes")).json()["total"]
    r = await admin.post("/admin/nodes", content=b'{"name": "s", "labels": {"zone": %s}}' % raw,
                         headers={"content-type": "application/json"})  # fmt: skip
    body = _refused(r, 422, "invalid_text", "body.labels.zone")
    assert "surrogate" in body["detail"]
    assert (await admin.get("/admin/nodes")).json()["total"] == before


async def test_lone_surrogate_in_chat_content_is_422_naming_the_field(tenant):
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi \\ud83d"}]}'
    r = await tenant.post("/v1/chat/completions", content=body,
                          headers={"content-type": "application/json"})  # fmt: skip
    _refused(r, 422, "invalid_text", "body.messages.0.content")


async def test_a_surrogate_pair_is_text_and_passes(admin):
    r = await admin.post("/admin/nodes", content=b'{"name": "emoji-\\ud83d\\ude00"}',
                         headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code == 201 and r.json()["name"] == "emoji-\U0001f600", r.text


# -- body size -----------------------------------------------------------------------------------


async def _chunks(total: int, size: int = 1 << 20):
    sent = 0
    while sent < total:
        yield b" " * min(size, total - sent)
        sent += size


@pytest.mark.parametrize("path", ["/admin/nodes", "/admin/workflows", "/v1/embeddings"])
async def test_a_chunked_10_mb_body_is_413_naming_the_limit(edge, path):
    token = ADMIN_TOKEN if path.startswith("/admin") else edge[1]
    async with client_for(edge[0].app, token) as client:
        r = await client.post(path, content=_chunks(10 * LIMIT),
                              headers={"content-type": "application/json"})  # fmt: skip
        assert "content-length" not in r.request.headers  # really chunked
        body = _refused(r, 413, "body_too_large")
        assert str(LIMIT) in body["detail"]


async def test_over_a_real_connection_the_413_arrives_instead_of_a_reset(edge):
    import asyncio

    import uvicorn

    server = uvicorn.Server(uvicorn.Config(edge[0].app, host="127.0.0.1", port=0,
                                           log_level="warning", lifespan="off"))  # fmt: skip
    serving = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "content-type": "application/json"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for content in (_chunks(10 * LIMIT), b" " * (2 * LIMIT)):  # chunked; with a length
                r = await client.post("/admin/nodes", content=content, headers=headers)
                _refused(r, 413, "body_too_large")
    finally:
        server.should_exit = True
        await serving


# -- WebSocket -----------------------------------------------------------------------------------


@pytest.mark.parametrize("with_header", [True, False])
def test_websocket_non_json_first_message_gets_an_error_then_a_close_with_reason(
    edge, with_header
) -> None:
    headers = {"Authorization": f"Bearer {edge[1]}"} if with_header else {}
    with TestClient(edge[0].app).websocket_connect("/v1/runs/ws", headers=headers) as ws:
        ws.send_text("this is not JSON {")
        message = ws.receive_json()
        assert message["type"] == "error" and message["error"] == "invalid_json", message
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    assert closed.value.code == 1007 and "not JSON" in closed.value.reason


def test_websocket_binary_message_is_closed_with_1003(edge):
    headers = {"Authorization": f"Bearer {edge[1]}"}
    with TestClient(edge[0].app).websocket_connect("/v1/runs/ws", headers=headers) as ws:
        ws.send_bytes(b"\x00\x01")
        assert ws.receive_json()["error"] == "invalid_message"
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_text()
    assert closed.value.code == 1003 and closed.value.reason


# -- model sources -------------------------------------------------------------------------------


def _model(name: str, location: str) -> dict:
    return {"name": name, "version": "1", "task": "embed", "weights_source": "path",
            "weights_location": location, "memory_mib": 10}  # fmt: skip


@pytest.mark.parametrize("location", ["/etc", "../../etc", "../../../../etc/passwd", "to-etc",
                                      "good/../../../etc", "bad\x00path"])  # fmt: skip
async def test_model_folder_outside_the_source_roots_is_422_naming_them(
    edge, admin, location
) -> None:
    models = edge[2]
    if not location.startswith(("/", "..")):
        location = str(models / location)  # under the root as written; a symlink or .. out
    before = (await admin.get("/admin/models")).json()["total"]
    body = _refused(await admin.post("/admin/models", json=_model("m-out", location)), 422,
                    "invalid_value", "weights_location")  # fmt: skip
    if "\x00" not in location:
        assert str(models.resolve()) in body["detail"] and "LEGATO_MODEL_SOURCE_ROOTS" in body[
            "detail"]  # fmt: skip
    assert (await admin.get("/admin/models")).json()["total"] == before


async def test_model_folder_under_a_root_registers_and_cannot_move_out(edge, admin):
    r = await admin.post("/admin/models", json=_model("m-in", str(edge[2] / "good")))
    assert r.status_code == 201, r.text
    model_id = r.json()["id"]
    r = await admin.patch(f"/admin/models/{model_id}", json={"weights_location": "/etc"})
    _refused(r, 422, "invalid_value", "weights_location")
    r = await admin.get(f"/admin/models/{model_id}")
    assert r.json()["weights_location"] == str(edge[2] / "good")
