"""The admin API client: the console's only way to the control plane (HTTP, httpx).

Every call either returns the decoded JSON body or raises :class:`ApiError` carrying the API's
own error body (``error`` code, ``detail`` sentence, offending ``field`` and per-location
``problems``), so a page can show the API's message next to the field it concerns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

#: Largest page the API serves; list_all walks pages of this size.
PAGE_LIMIT = 1000


@dataclass(frozen=True)
class Problem:
    location: str
    message: str


class ApiError(Exception):
    """An error answer (or no answer) from the API. ``status`` 0: the API was unreachable."""

    def __init__(
        self,
        status: int,
        error: str,
        detail: str,
        field: str | None = None,
        problems: list[Problem] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.error = error
        self.detail = detail
        self.field = field
        self.problems = list(problems or [])

    def __str__(self) -> str:
        return self.detail

    def about(self, name: str) -> list[str]:
        """Messages concerning field or node ``name`` (``body.nominal``, ``nodes[llm]``...)."""
        found = [p.message for p in self.problems if _concerns(p.location, name)]
        if not found and self.field is not None and _concerns(self.field, name):
            found.append(self.detail)
        return found


def _concerns(location: str, name: str) -> bool:
    parts = location.replace("[", ".").replace("]", "").split(".")
    return name in parts or location == name


def _error_of(response: httpx.Response) -> ApiError:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    problems = [Problem(str(p.get("location", "")), str(p.get("message", "")))
                for p in body.get("problems") or [] if isinstance(p, dict)]  # fmt: skip
    return ApiError(
        status=response.status_code,
        error=str(body.get("error", "http_error")),
        detail=str(body.get("detail") or response.reason_phrase or "error"),
        field=body.get("field"),
        problems=problems,
    )


class ApiClient:
    """A client of one API with one credential. Thread-safe like the httpx.Client under it."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout_s: float = 15.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send one request; the JSON body on 2xx (None for 204), ApiError otherwise."""
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            detail = f"the API at {self.base_url} did not answer: {exc}"
            raise ApiError(0, "unreachable", detail) from exc
        if response.status_code >= 400:
            raise _error_of(response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    def get(self, path: str, **params: Any) -> Any:
        clean = {k: v for k, v in params.items() if v is not None}
        return self.request("GET", path, params=clean)

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.request("POST", path, json=body or {})

    def patch(self, path: str, body: dict[str, Any]) -> Any:
        return self.request("PATCH", path, json=body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

    def pages(self, path: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every item of a paginated list route, page by page."""
        offset = 0
        while True:
            page = self.get(path, limit=PAGE_LIMIT, offset=offset, **params)
            yield from page["items"]
            offset += len(page["items"])
            if not page["items"] or offset >= page["total"]:
                return

    def list_all(self, path: str, **params: Any) -> list[dict[str, Any]]:
        return list(self.pages(path, **params))

    def check_admin(self) -> None:
        """Raise ApiError unless the credential is the admin's (used at sign-in)."""
        self.get("/admin/tenants", limit=1)
