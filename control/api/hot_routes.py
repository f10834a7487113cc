"""Hot routes: the tenant inference routes served without FastAPI's per-call machinery.

FastAPI serves any route generically: it walks the route table, solves the endpoint's
dependency graph, builds a sub-response, validates the return value and wraps the call in
several layers. On the embeddings route that was about 450 us of the gateway's ~2.3 ms of CPU
per call on this machine, against ~60 us for uvicorn itself. The inference routes are few and
have one shape: a tenant credential, an optional ``Idempotency-Key`` header, perhaps path
parameters, and one JSON body. :class:`HotRoutes`, an ASGI middleware, serves exactly that
shape directly, from the route's own definition: the same endpoint function, its parameters'
own annotations (so the same constraints), the same body model, the same response model and
the app's own exception handlers (so the same JSON and the same error bodies). The routes stay
declared on the FastAPI app, which keeps the OpenAPI document and serves everything else.

Contract: a call this middleware answers gets the answer FastAPI would give. Whatever it is
not sure of -- a body that is not JSON or fails validation, a header or path parameter out of
its bounds, another content type -- it hands to FastAPI unchanged (replaying the body it read)
before anything has happened, so every validation error body is FastAPI's own. Errors the
endpoint raises go through the app's exception handlers, as under FastAPI.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin, get_type_hints

from fastapi import params
from pydantic import BaseModel, TypeAdapter
from pydantic import ValidationError as PydanticError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control.api.auth import PrincipalBearer

Endpoint = Callable[..., Awaitable[Any]]
#: Exception class -> handler, as ``FastAPI.exception_handlers`` holds them.
Handlers = Mapping[Any, Callable[[Request, Exception], Any]]


class _HandOver(Exception):
    """Raised while reading a call that FastAPI must answer instead (before any effect)."""


@dataclass(frozen=True)
class HotRoute:
    """``POST path`` served by ``endpoint`` (the function the FastAPI route declares, whose
    return annotation is its response model: a ``response_model=`` given to the decorator
    instead would not be seen here). ``path`` uses FastAPI's ``{name}`` placeholders; it
    doubles as the metrics label."""

    path: str
    endpoint: Endpoint


@dataclass(frozen=True)
class _Param:
    """One endpoint parameter and where its value comes from."""

    name: str
    source: str  # request | response | principal | header | path | body
    adapter: TypeAdapter[Any] | None = None  # header and path values: their own constraints
    header: bytes = b""  # the header's name, lower case
    auth: PrincipalBearer | None = None
    model: type[BaseModel] | None = None


class _Plan:
    """How to call one hot route: its parameters, its response adapter, its path pattern."""

    def __init__(self, route: HotRoute) -> None:
        self.route = route
        self.path = route.path  # what MetricsMiddleware labels the call with
        names = re.findall(r"{(\w+)}", route.path)
        self.pattern = (
            re.compile("^" + re.sub(r"{(\w+)}", r"(?P<\1>[^/]+)", route.path) + "$")
            if names
            else None
        )
        if not inspect.iscoroutinefunction(route.endpoint):
            raise ValueError(f"hot route {route.path}: the endpoint must be a coroutine function")
        hints = get_type_hints(route.endpoint, include_extras=True)
        self.params = tuple(
            _param_of(route, name, hints[name])
            for name in inspect.signature(route.endpoint).parameters
        )
        sources = [p.source for p in self.params]
        if sources.count("principal") != 1 or sources.count("body") != 1:
            raise ValueError(f"hot route {route.path}: needs one credential and one JSON body")
        if sorted(p.name for p in self.params if p.source == "path") != sorted(names):
            raise ValueError(f"hot route {route.path}: path parameters do not match {names}")
        self.response = TypeAdapter(hints["return"])


def _param_of(route: HotRoute, name: str, hint: Any) -> _Param:
    """Classify one endpoint parameter; anything FastAPI would solve differently is refused
    here, at app build time, so a hot route can never quietly diverge from its declaration."""
    if hint is Request:
        return _Param(name, "request")
    if hint is Response:
        return _Param(name, "response")
    if inspect.isclass(hint) and issubclass(hint, BaseModel):
        return _Param(name, "body", model=hint)
    if get_origin(hint) is Annotated:
        _, *extras = get_args(hint)
        for extra in extras:
            if isinstance(extra, params.Depends) and isinstance(extra.dependency, PrincipalBearer):
                return _Param(name, "principal", auth=extra.dependency)
            if isinstance(extra, params.Header):
                header = extra.alias or (name.replace("_", "-") if extra.convert_underscores
                                         else name)  # fmt: skip
                return _Param(name, "header", TypeAdapter(hint), header.lower().encode())
            if isinstance(extra, params.Path):
                return _Param(name, "path", TypeAdapter(hint))
    raise ValueError(f"hot route {route.path}: parameter {name!r} ({hint}) is not supported")


class HotTable:
    """The hot routes, compiled once when the app is built (an endpoint whose shape is not
    supported raises ValueError then, not on its first call), and the calls they answered
    (``served``) or handed to FastAPI (``handed_over``)."""

    def __init__(self, routes: Sequence[HotRoute]) -> None:
        plans = [_Plan(r) for r in routes]
        self._exact = {p.path: p for p in plans if p.pattern is None}
        self._patterned = [p for p in plans if p.pattern is not None]
        self.served = 0
        self.handed_over = 0

    def match(self, path: str) -> tuple[_Plan | None, dict[str, str]]:
        """The plan serving ``path`` and its path parameters; (None, {}) for another path."""
        plan = self._exact.get(path)
        if plan is not None:
            return plan, {}
        for plan in self._patterned:
            assert plan.pattern is not None
            found = plan.pattern.match(path)
            if found is not None:
                return plan, found.groupdict()
        return None, {}


class HotRoutes:
    """ASGI middleware answering ``POST`` calls of the ``table``'s routes (see the module
    docstring); everything else goes on to ``app``. It sits inside the size limit and metrics
    middleware and outside FastAPI's exception middleware, so it maps the exceptions of the
    calls it serves with ``handlers`` (the app's) itself."""

    def __init__(self, app: ASGIApp, table: HotTable, handlers: Handlers) -> None:
        self.app = app
        self.table = table
        self.handlers = handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            await self.app(scope, receive, send)
            return
        plan, path_params = self.table.match(scope["path"])
        if plan is None:
            await self.app(scope, receive, send)
            return
        try:
            body = await _read_body(receive)  # BodyTooLarge goes up to the size limit
        except _Disconnected:
            return  # the caller left before its body arrived: nobody to answer

        def replay_first() -> Receive:
            sent = False

            async def replay() -> Message:
                nonlocal sent
                if sent:
                    return await receive()
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            return replay

        try:
            await self._serve(plan, scope, path_params, body, replay_first(), receive, send)
        except _HandOver:
            self.table.handed_over += 1
            await self.app(scope, replay_first(), send)

    async def _serve(
        self, plan: _Plan, scope: Scope, path_params: dict[str, str], body: bytes,
        replay: Receive, receive: Receive, send: Send,
    ) -> None:  # fmt: skip
        """Answer the call, or raise _HandOver before anything happened."""
        document = _json_document(scope, body)
        scope["route"] = plan
        scope["path_params"] = path_params
        request = Request(scope, replay)
        request._body = body  # a later request.body() gets what was read
        try:
            response = await self._call(plan, request, document, path_params)
        except _HandOver:
            del scope["route"], scope["path_params"]
            raise
        except Exception as exc:
            handler = self._handler_of(exc)
            if handler is None:
                raise  # unmapped: the server error middleware answers 500, as under FastAPI
            response = handler(request, exc)
            if inspect.isawaitable(response):
                response = await response
        self.table.served += 1
        await response(scope, receive, send)

    async def _call(
        self, plan: _Plan, request: Request, document: Any, path_params: dict[str, str]
    ) -> Response:
        """Solve the parameters in FastAPI's order (credential first, then path, header and
        body values) and run the endpoint; the response it gives or FastAPI would make."""
        kwargs: dict[str, Any] = {}
        sub: Response | None = None
        for p in plan.params:  # the credential first: a bad key is a 401 whatever the body
            if p.source == "principal":
                assert p.auth is not None
                kwargs[p.name] = await p.auth(request)
        try:
            for p in plan.params:
                if p.source == "path":
                    assert p.adapter is not None
                    kwargs[p.name] = p.adapter.validate_python(path_params[p.name])
                elif p.source == "header":
                    assert p.adapter is not None
                    value = _header(request.scope, p.header)
                    kwargs[p.name] = None if value is None else p.adapter.validate_python(value)
                elif p.source == "body":
                    assert p.model is not None
                    kwargs[p.name] = p.model.model_validate(document)
                elif p.source == "request":
                    kwargs[p.name] = request
                elif p.source == "response":
                    sub = kwargs[p.name] = _sub_response()
        except PydanticError as exc:
            raise _HandOver() from exc  # FastAPI words the 422 (and lists every problem)
        result = await plan.route.endpoint(**kwargs)
        if isinstance(result, Response):
            return result
        content = plan.response.dump_json(plan.response.validate_python(result), by_alias=True)
        status = sub.status_code if sub is not None and sub.status_code else 200
        response = Response(content, status_code=status, media_type="application/json")
        if sub is not None:
            response.headers.raw.extend(sub.headers.raw)
        return response

    def _handler_of(self, exc: Exception) -> Callable[[Request, Exception], Any] | None:
        for cls in type(exc).__mro__:
            if cls in self.handlers:
                return self.handlers[cls]
        return None


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _Disconnected()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


class _Disconnected(Exception):
    """The client went away before its body arrived (nothing to answer)."""


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def _json_document(scope: Scope, body: bytes) -> Any:
    """The parsed JSON body; _HandOver for no body, another content type or broken JSON."""
    kind = _header(scope, b"content-type")
    if not body or kind is None or kind.split(";", 1)[0].strip().lower() != "application/json":
        raise _HandOver()
    try:
        return json.loads(body)
    except ValueError as exc:
        raise _HandOver() from exc


def _sub_response() -> Response:
    """What FastAPI hands an endpoint's ``Response`` parameter: headers to add, no status."""
    sub = Response()
    del sub.headers["content-length"]
    sub.status_code = None  # type: ignore[assignment]
    return sub
