"""Error mapping, in one place: domain errors and protocol errors become JSON bodies.

Every error body has the same shape (:class:`ErrorBody`): a machine-readable ``error`` code, a
``detail`` sentence saying what is wrong, and where it applies the offending ``field`` and a list
of ``problems`` (one per location, e.g. per workflow node). ``ERROR_RESPONSES`` documents the
shape for every status in the OpenAPI document so that clients and schema checks see the truth.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from control.services.errors import (
    Conflict,
    DomainError,
    DuplicateName,
    IdempotencyConflict,
    NotFound,
    ValidationError,
)
from control.services.inference import ServiceUnavailable


class Problem(BaseModel):
    """One problem at one location (``nodes[llm]``, ``body.name``)."""

    location: str
    message: str


class ErrorBody(BaseModel):
    """The body of every error response."""

    error: str = Field(description="machine-readable code, e.g. not_found, quota_exceeded")
    detail: str = Field(description="what is wrong, in a sentence")
    field: str | None = Field(None, description="the offending field, when one is to blame")
    problems: list[Problem] = Field(default_factory=list)


class ApiError(Exception):
    """An error the API raises itself (auth, rate limits, timeouts); carries its status."""

    def __init__(
        self,
        status: int,
        error: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        problems: list[Problem] | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.body = ErrorBody(error=error, detail=detail, field=field, problems=problems or [])
        self.headers = headers or {}


_DESCRIPTIONS = {
    400: "The request contradicts the domain rules.",
    401: "Missing or invalid credentials.",
    403: "The credential may not use this route.",
    404: "No such entity.",
    409: "Conflicts with the stored state (duplicate, illegal transition, idempotency key).",
    413: "The request body is too large.",
    422: "A field holds a value the API refuses; ``problems`` lists each one.",
    429: "Refused by admission control; retry after ``Retry-After`` seconds.",
    502: "The run failed on the executor; ``detail`` says how.",
    503: "No healthy device can serve, or the runtime is not running.",
    504: "The run did not finish within the timeout.",
}

#: OpenAPI ``responses`` for every error status the API can return.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text} for code, text in _DESCRIPTIONS.items()
}


def error_response(
    status: int, body: ErrorBody, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(status_code=status, content=body.model_dump(), headers=headers)


def domain_status(exc: DomainError) -> tuple[int, str]:
    """The status and error code of a domain error (most specific class first)."""
    for cls, status, code in (
        (ServiceUnavailable, 503, "no_capacity"),
        (IdempotencyConflict, 409, "idempotency_conflict"),
        (Conflict, 409, "conflict"),
        (NotFound, 404, "not_found"),
        (ValidationError, 422, "invalid_value"),
    ):
        if isinstance(exc, cls):
            return status, code
    return 400, "refused"


def domain_body(exc: DomainError) -> tuple[int, ErrorBody]:
    status, code = domain_status(exc)
    field = exc.field if isinstance(exc, ValidationError) else None
    if isinstance(exc, DuplicateName) and exc.key:  # name the field a form would change
        field = list(exc.key)[-1]
        problems = [Problem(location=field, message=str(exc))]
        return status, ErrorBody(error=code, detail=str(exc), field=field, problems=problems)
    problems = [Problem(location=field, message=exc.message)] if field is not None else []
    return status, ErrorBody(error=code, detail=str(exc), field=field, problems=problems)


def _location(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _validation_body(exc: RequestValidationError) -> ErrorBody:
    problems = [
        Problem(location=_location(e.get("loc", ())), message=str(e.get("msg", "invalid")))
        for e in exc.errors()
    ]
    first = problems[0] if problems else Problem(location="body", message="invalid")
    return ErrorBody(
        error="invalid_request",
        detail=f"{len(problems)} invalid field(s); first: {first.location}: {first.message}",
        field=first.location,
        problems=problems,
    )


def install_error_handlers(app: FastAPI) -> None:
    """Map every error the routes may raise to one JSON shape. Called once by the app factory."""

    async def on_domain(_: Request, exc: Exception) -> JSONResponse:
        status, body = domain_body(exc)  # type: ignore[arg-type]
        return error_response(status, body)

    async def on_api(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return error_response(exc.status, exc.body, exc.headers)

    async def on_invalid(_: Request, exc: Exception) -> JSONResponse:
        body = _validation_body(exc)  # type: ignore[arg-type]
        return JSONResponse(status_code=422, content=jsonable_encoder(body))

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        body = ErrorBody(error=code, detail=str(exc.detail))
        return error_response(exc.status_code, body, getattr(exc, "headers", None))

    app.add_exception_handler(DomainError, on_domain)
    app.add_exception_handler(ApiError, on_api)
    app.add_exception_handler(RequestValidationError, on_invalid)
    app.add_exception_handler(StarletteHTTPException, on_http)
