"""Unknown query parameters of list routes are refused, never ignored.

A filter misspelt (``?stauts=up``) used to list everything as if no filter were given; a list
route now answers 422 naming each unknown parameter and the ones it knows, and lists nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from fastapi import Request

from control.api.errors import ApiError

#: The pagination parameters every list route takes besides its filters.
PAGE_PARAMS = ("limit", "offset")


def known_query(names: Iterable[str]) -> Callable[[Request], None]:
    """A dependency raising a 422 (``unknown_filter``, ``field`` = ``query.<first unknown>``)
    for a query parameter not in ``names`` or the pagination ones."""
    known = frozenset(names) | frozenset(PAGE_PARAMS)

    def check(request: Request) -> None:
        unknown = sorted(set(request.query_params) - known)
        if unknown:
            raise ApiError(
                422,
                "unknown_filter",
                f"unknown filter(s) {', '.join(repr(u) for u in unknown)}; known filters: "
                f"{', '.join(sorted(known))}",
                field=f"query.{unknown[0]}",
            )

    return check
