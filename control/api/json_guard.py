"""JSON bounded at the edge: nesting depth, and text that cannot be encoded.

Two kinds of JSON document pass the parser and then break whatever touches them next, far from
the caller: one nested thousands of levels deep (the parser, the validators, the database's
JSON encoder and the response encoder recurse, and Python's recursion limit turns that into a
500) and one holding a lone UTF-16 surrogate (``"\\ud800"`` is valid JSON, but no UTF-8 text
holds it: the tokenizer, the database and the response encoder raise on it). Both are refused
here, before any route sees the body, with a 422 that names the limit or the field.

:class:`JsonGuard` checks every HTTP request body that FastAPI would parse as JSON (no
content type, ``application/json`` or ``application/*+json``); the WebSocket route checks its
messages with :func:`json_problem` itself. The checks cost two ``bytes.count`` calls and one
regular-expression search on an ordinary body: the full scans run only on bodies that could
fail them (more brackets than the depth limit; a surrogate escape or encoding present).
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control.api.errors import ErrorBody, Problem

#: Default deepest nesting of arrays and objects a JSON document may have. Every document the
#: API defines nests under 10 levels; the bound is far below any recursion limit downstream.
MAX_JSON_DEPTH = 64

# A JSON string (escapes included): brackets inside it do not nest anything.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
# What can become a surrogate once parsed: a \uD800-\uDFFF escape, or its UTF-8-like bytes
# (json.loads decodes bytes with "surrogatepass").
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def nesting_depth_over(raw: bytes, limit: int) -> bool:
    """Whether the JSON text ``raw`` nests arrays/objects deeper than ``limit`` levels."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False  # cannot nest deeper than it has openers
    depth = 0
    for byte in _STRING.sub(b'""', raw).translate(None, _NOT_BRACKETS):
        depth += 1 if byte in b"[{" else -1
        if depth > limit:
            return True
    return False


def lone_surrogate_at(document: Any, root: str) -> tuple[str, str] | None:
    """(location, message) of the first string (key or value) of the parsed ``document``
    holding a lone surrogate, locations written ``root.key.0.key``; None when there is none."""
    stack: list[tuple[str, Any]] = [(root, document)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            found = _SURROGATE.search(value)
            if found is not None:
                point = f"U+{ord(found.group()):04X}"
                return where, (f"text holds a lone surrogate ({point}) at character "
                               f"{found.start()}: it is not Unicode text and cannot be encoded "
                               "as UTF-8")  # fmt: skip
        elif isinstance(value, dict):
            for key, item in reversed(value.items()):
                if _SURROGATE.search(key):
                    return f"{where}.{key.encode('utf-8', 'backslashreplace').decode()}", (
                        "a key holds a lone surrogate: it is not Unicode text"
                    )
                stack.append((f"{where}.{key}", item))
        elif isinstance(value, list):
            stack.extend((f"{where}.{i}", item) for i, item in reversed(list(enumerate(value))))
    return None


def json_problem(raw: bytes, limit: int, root: str = "body") -> ErrorBody | None:
    """Why the JSON text ``raw`` is refused (too deep, or a lone surrogate somewhere), as a
    422 error body; None when it may pass (including when it is not JSON at all: the route's
    own parser words that refusal)."""
    if nesting_depth_over(raw, limit):
        return ErrorBody(
            error="json_too_deep",
            detail=f"{root}: JSON nests arrays and objects deeper than {limit} levels "
            f"(the limit, max_json_depth)",
            field=root,
            problems=[Problem(location=root, message=f"nesting deeper than {limit} levels")],
        )
    if _MAYBE_SURROGATE.search(raw) is None:
        return None
    try:
        document = json.loads(raw)
    except ValueError:
        return None
    found = lone_surrogate_at(document, root)
    if found is None:
        return None
    where, message = found
    return ErrorBody(error="invalid_text", detail=f"{where}: {message}", field=where,
                     problems=[Problem(location=where, message=message)])  # fmt: skip


def _is_json(scope: Scope) -> bool:
    """Whether FastAPI would parse this body as JSON (its own rule)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            kind = value.decode("latin-1").split(";", 1)[0].strip().lower()
            main, _, sub = kind.partition("/")
            return main == "application" and (sub == "json" or sub.endswith("+json"))
    return True


class JsonGuard:
    """ASGI middleware refusing JSON request bodies that :func:`json_problem` refuses (422)
    before the app sees them; every other call goes through with its body unchanged. Sits
    inside :class:`control.api.limits.BodySizeLimit`, which bounds what it buffers."""

    def __init__(self, app: ASGIApp, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.app = app
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in _BODY_METHODS or not _is_json(scope):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        chunks: list[bytes] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break  # the caller left: the app sees that as it would have
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                problem = json_problem(body, self.max_depth)
                if problem is not None:
                    await _answer(send, 422, problem)
                    return
                messages = [{"type": "http.request", "body": body, "more_body": False}]
                break

        async def replay() -> Message:
            if messages:
                return messages.pop(0)
            return await receive()

        await self.app(scope, replay, send)


async def _answer(send: Send, status: int, body: ErrorBody) -> None:
    content = body.model_dump_json().encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(content)).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
