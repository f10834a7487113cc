"""Shared field types and the page envelope of every list route.

Integer fields are bounded to what both databases store (64-bit) so an absurd number is a 422,
not a database error; text fields carry the column lengths. Times given as input are
:data:`UtcDateTime`: a time without a zone (or a bare date, read as its midnight) is taken to
be UTC, one with a zone is converted to UTC, and one whose UTC reading falls outside years
1-9999 is a 422.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

MAX_INT = 2**53 - 1  # exact in JSON numbers and in both databases

Id = Annotated[int, Field(ge=1, le=MAX_INT)]
NonNegative = Annotated[int, Field(ge=0, le=MAX_INT)]
Positive = Annotated[int, Field(ge=1, le=MAX_INT)]
JsonObject = dict[str, Any]


def as_utc(value: datetime) -> datetime:
    """``value`` in UTC. Naive values are read as UTC (the ledger and the audit log record
    UTC, and a date-only ``2026-12-01`` means that day from midnight UTC); aware ones are
    converted. ValueError (a 422 under pydantic) when the UTC time is not representable."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(
            f"{value.isoformat()} is outside years 1-9999 once converted to UTC"
        ) from None


#: An input time, normalised to UTC (see :func:`as_utc`).
UtcDateTime = Annotated[datetime, AfterValidator(as_utc)]

#: Default and largest page sizes of list routes.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def name_field(max_len: int, description: str = "", *, default: Any = ...) -> Any:
    """A non-blank string of at most ``max_len`` characters (required unless ``default``)."""
    return Field(default, min_length=1, max_length=max_len, pattern=r"\S", description=description)


class Dto(BaseModel):
    """Base of response DTOs: built from the services' records by attribute."""

    model_config = ConfigDict(from_attributes=True)


class Body(BaseModel):
    """Base of request bodies: unknown fields are refused (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list: ``items`` from ``offset``; ``total`` matching items in all."""

    items: list[T]
    total: int
    limit: int
    offset: int
