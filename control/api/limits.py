"""Request size limit as a plain ASGI middleware (cheap on the hot path).

A body whose ``Content-Length`` is over the limit is refused before it is read; a chunked body
is counted as it arrives and refused when it passes the limit. Either way, on every route, the
caller gets 413 with the usual error body naming the limit, whatever the route's framework
makes of the aborted read (FastAPI turns any exception while reading a body into a 400 "error
parsing the body": that answer is replaced by the 413 before anything of it is sent).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: How much of a refused body is still read (and dropped) before the 413, so that the caller,
#: which is usually still sending, reads the answer instead of a connection reset (a socket
#: closed with unread data in it is reset). Past this the connection is simply closed.
DRAIN_BYTES = 64 * 1024 * 1024


class BodyTooLarge(Exception):
    pass


def _body_413(limit: int) -> bytes:
    return json.dumps(
        {
            "error": "body_too_large",
            "detail": f"request body is larger than {limit} bytes (the limit, max_body_bytes)",
            "field": "body",
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
            await _drain(receive, more=True)  # before answering: the server stops reading after
            await self._refuse(send)
            return
        seen = 0
        over = False  # the body passed the limit: whatever the app answers, the caller gets 413
        more = True  # more of the body is to come
        started = False

        async def counted() -> Message:
            nonlocal seen, over, more
            if over:
                raise BodyTooLarge()
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                more = bool(message.get("more_body", False))
                if seen > self.max_bytes:
                    over = True
                    raise BodyTooLarge()
            return message

        async def tracking(message: Message) -> None:
            nonlocal started
            if over:
                if message["type"] == "http.response.start" and not started:
                    started = True
                    await _drain(receive, more)
                    await self._refuse(send)
                return  # the app's own answer to the aborted read is dropped
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracking)
        except BodyTooLarge:
            if not started:
                await _drain(receive, more)
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = _body_413(self.max_bytes)
        headers: list[Any] = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),  # the rest of the body is dropped, not served
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _drain(receive: Receive, more: bool) -> None:
    """Read and drop the rest of a refused body, at most :data:`DRAIN_BYTES`."""
    dropped = 0
    while more and dropped <= DRAIN_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        dropped += len(message.get("body", b""))
        more = bool(message.get("more_body", False))


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
