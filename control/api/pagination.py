"""Pagination of list routes: ``limit`` and ``offset`` query parameters, one envelope."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import Query

from control.api.schemas.common import DEFAULT_LIMIT, MAX_INT, MAX_LIMIT, Page

T = TypeVar("T")


@dataclass(frozen=True)
class PageParams:
    limit: int
    offset: int


def page_params(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="items per page")] = DEFAULT_LIMIT,
    offset: Annotated[int, Query(ge=0, le=MAX_INT, description="items to skip")] = 0,
) -> PageParams:
    return PageParams(limit=limit, offset=offset)


def page_of(found: Any, params: PageParams, to_dto: Callable[[Any], T]) -> Page[T]:
    """The envelope of a page the database already cut (``found``: items and total)."""
    return Page[Any](
        items=[to_dto(i) for i in found.items],
        total=found.total,
        limit=params.limit,
        offset=params.offset,
    )
