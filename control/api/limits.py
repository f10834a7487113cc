"""Request size limit as a plain ASGI middleware (cheap on the hot path).

A body whose ``Content-Length`` is over the limit is refused before it is read; a chunked body
is counted as it arrives and refused when it passes the limit. Either way the caller gets 413
with the usual error body.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):
    pass


def _body_413(limit: int) -> bytes:
    return json.dumps(
        {
            "error": "body_too_large",
            "detail": f"request body is larger than {limit} bytes",
            "field": None,
            "problems": [],
        }
    ).encode()


class BodySizeLimit:
    """Refuse HTTP request bodies larger than ``max_bytes`` with 413."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _content_length(scope)
        if length is not None and length > self.max_bytes:
            await self._refuse(send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge()
            return message

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracking)
        except BodyTooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = _body_413(self.max_bytes)
        headers: list[Any] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
