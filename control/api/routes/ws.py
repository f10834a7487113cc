"""Workflow runs over a WebSocket: one connection, many runs, tokens as they come.

Authenticate on the handshake with ``Authorization: Bearer <tenant key>`` (or a first message
``{"token": "..."}`` for clients that cannot set headers). Then send
``{"workflow": name, "version": v, "inputs": {...}, "idempotency_key": optional}``; the server
answers ``{"type": "accepted", "run_id"}``, ``{"type": "token", ...}`` per streamed delta and
``{"type": "result", "run": {...}}`` at the end, or ``{"type": "error", "status", "error",
"detail"}``. A bad credential closes the socket with code 1008.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.security import HTTPAuthorizationCredentials

from control.api.auth import Principal, authenticate
from control.api.deps import GatewayDep
from control.api.errors import ApiError, domain_body
from control.api.running import body_hash, run_out, start_run
from control.api.state import Gateway
from control.services.errors import DomainError

router = APIRouter()
POLICY_VIOLATION = 1008


async def _authenticate(ws: WebSocket) -> Principal | None:
    header = ws.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not token or scheme.lower() != "bearer":
        first = await ws.receive_json()
        token = str(first.get("token", "")) if isinstance(first, dict) else ""
    try:
        who = await authenticate(ws, HTTPAuthorizationCredentials(scheme="Bearer",
                                                                  credentials=token))  # fmt: skip
    except ApiError:
        return None
    return None if who.is_admin else who


async def _one_run(ws: WebSocket, gw: Gateway, who: Principal, msg: dict[str, Any]) -> None:
    name, version = str(msg.get("workflow", "")), str(msg.get("version", ""))
    inputs = msg.get("inputs")
    if not name or not version or not isinstance(inputs, dict):
        await ws.send_json({"type": "error", "status": 422, "error": "invalid_request",
                            "detail": "send workflow, version and inputs (an object)"})  # fmt: skip
        return
    key = msg.get("idempotency_key")
    digest = body_hash(f"workflow:{name}:{version}", {"inputs": inputs})
    started = await start_run(gw, who, (name, version), inputs, digest,
                              str(key) if key else None)  # fmt: skip
    run_id = started.request.id
    await ws.send_json({"type": "accepted", "run_id": run_id, "replayed": started.existing})
    assert gw.inference is not None
    deltas = gw.inference.stream(run_id)
    if deltas is not None:
        async for d in deltas:
            await ws.send_json({"type": "token", "run_id": run_id, "node": d.node_id,
                                "index": d.index, "text": d.text})  # fmt: skip
    record = await gw.inference.wait(run_id, gw.config.max_wait_s)
    await ws.send_json({"type": "result", "run": run_out(record).model_dump(mode="json")})


@router.websocket("/v1/runs/ws")
async def runs_socket(ws: WebSocket, gw: GatewayDep) -> None:
    await ws.accept()
    who = await _authenticate(ws)
    if who is None:
        await ws.close(code=POLICY_VIOLATION, reason="invalid credentials")
        return
    try:
        while True:
            msg = await ws.receive_json()
            try:
                await _one_run(ws, gw, who, msg if isinstance(msg, dict) else {})
            except ApiError as exc:
                await ws.send_json({"type": "error", "status": exc.status, **exc.body.model_dump()})
            except DomainError as exc:
                status, body = domain_body(exc)
                await ws.send_json({"type": "error", "status": status, **body.model_dump()})
    except WebSocketDisconnect:
        return
