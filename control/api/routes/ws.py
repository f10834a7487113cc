"""Workflow runs over a WebSocket: one connection, many runs, tokens as they come.

Authenticate on the handshake with ``Authorization: Bearer <tenant key>`` (or a first message
``{"token": "..."}`` for clients that cannot set headers). Then send
``{"workflow": name, "version": v, "inputs": {...}, "idempotency_key": optional}``; the server
answers ``{"type": "accepted", "run_id"}``, ``{"type": "token", ...}`` per streamed delta and
``{"type": "result", "run": {...}}`` at the end (``"cancelled"`` for a cancelled run), or
``{"type": "error", "status", "error", "detail"}``. A bad credential closes the socket with
code 1008.

Every message must be JSON text (the HTTP routes' limits apply: at most ``max_body_bytes``,
nesting at most ``max_json_depth``, no lone surrogate). One that is not gets an ``error``
message naming what is wrong, then a close frame with a reason: 1003 for a binary message,
1009 for one too large, 1007 for any other (not JSON, too deep, undecodable text).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from fastapi.security import HTTPAuthorizationCredentials

from control.api.auth import Principal, authenticate
from control.api.deps import GatewayDep
from control.api.errors import ApiError, ErrorBody, domain_body
from control.api.json_guard import json_problem
from control.api.running import body_hash, run_out, start_run
from control.api.state import Gateway
from control.services.errors import DomainError

router = APIRouter()
POLICY_VIOLATION = 1008
UNSUPPORTED_DATA = 1003
INVALID_PAYLOAD = 1007
TOO_BIG = 1009


class _Refused(Exception):
    """A message the protocol cannot take: answered with ``body``, then closed with ``code``."""

    def __init__(self, code: int, status: int, body: ErrorBody) -> None:
        super().__init__(body.detail)
        self.code = code
        self.status = status
        self.body = body


class _Gone(Exception):
    """The client closed the socket."""


async def _next_message(ws: WebSocket, gw: Gateway) -> Any:
    """The next message, parsed from JSON text. Raises _Gone when the client left, _Refused
    for a message that is binary, too large, not JSON, too deep or holds a lone surrogate."""
    message = await ws.receive()
    if message["type"] == "websocket.disconnect":
        raise _Gone()
    text = message.get("text")
    if text is None:
        raise _Refused(UNSUPPORTED_DATA, 422, ErrorBody(
            error="invalid_message", detail="send JSON text messages, not binary ones",
            field="message"))  # fmt: skip
    raw = text.encode("utf-8", "surrogatepass")
    limit = gw.config.max_body_bytes
    if len(raw) > limit:
        raise _Refused(TOO_BIG, 413, ErrorBody(
            error="message_too_large", field="message",
            detail=f"the message is larger than {limit} bytes (the limit, max_body_bytes)"))  # fmt: skip
    problem = json_problem(raw, gw.config.max_json_depth, root="message")
    if problem is not None:
        raise _Refused(INVALID_PAYLOAD, 422, problem)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _Refused(INVALID_PAYLOAD, 422, ErrorBody(
            error="invalid_json", field="message",
            detail=f"the message is not JSON ({exc}); send a JSON object")) from None  # fmt: skip


async def _authenticate(ws: WebSocket, gw: Gateway) -> Principal | None:
    header = ws.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not token or scheme.lower() != "bearer":
        first = await _next_message(ws, gw)
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
    end = "cancelled" if record.status == "cancelled" else "result"  # a cancelled run says so
    await ws.send_json({"type": end, "run": run_out(record).model_dump(mode="json")})


async def _serve(ws: WebSocket, gw: Gateway, who: Principal) -> None:
    """Run each message's workflow in turn until the client leaves (_Gone) or sends one the
    protocol refuses (_Refused)."""
    while True:
        msg = await _next_message(ws, gw)
        try:
            await _one_run(ws, gw, who, msg if isinstance(msg, dict) else {})
        except ApiError as exc:
            await ws.send_json({"type": "error", "status": exc.status, **exc.body.model_dump()})
        except DomainError as exc:
            status, body = domain_body(exc)
            await ws.send_json({"type": "error", "status": status, **body.model_dump()})


@router.websocket("/v1/runs/ws")
async def runs_socket(ws: WebSocket, gw: GatewayDep) -> None:
    await ws.accept()
    try:
        who = await _authenticate(ws, gw)
        if who is None:
            await ws.close(code=POLICY_VIOLATION, reason="invalid credentials")
            return
        await _serve(ws, gw, who)
    except _Refused as exc:
        await ws.send_json({"type": "error", "status": exc.status, **exc.body.model_dump()})
        await ws.close(code=exc.code, reason=_reason(exc.body.detail))
    except (_Gone, WebSocketDisconnect):
        return


def _reason(detail: str) -> str:
    """A close reason within the protocol's 123 bytes."""
    data = detail.encode()
    return detail if len(data) <= 123 else data[:120].decode(errors="ignore") + "..."
