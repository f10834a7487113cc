"""Declarative base, naming convention and column types shared by every table.

``db`` imports nothing else of Legato's: row timestamps come either from the caller (services
read ``control.clock.utcnow`` and pass it in) or from the database's own ``now()`` as a
server default, so this package never reads the wall clock itself.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, MetaData, func
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

#: Constraint names are derived, never left to the backend, so that migrations written on
#: SQLite name the same objects on PostgreSQL and ``alembic check`` can compare them.
NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def _utc_text(value: datetime) -> str:
    """A UTC datetime as SQLite's DATETIME stores it (the year zero-padded to four digits,
    always six digits of microseconds; the offset dropped)."""
    return value.isoformat(" ", "microseconds")[:26]


_PROBE = datetime(987, 6, 5, 4, 3, 2, tzinfo=UTC)  # short year, no microseconds


class UtcDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every backend.

    PostgreSQL keeps the zone (``timestamptz``); SQLite stores naive text, so values are
    converted to UTC before they are written and tagged as UTC when read back. Naive datetimes
    are refused on the way in: their zone would be a guess.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware UTC datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        """The composed processor, except where it stores text (SQLite): a UTC ``datetime``
        (every row timestamp the services write) is then turned into that text directly,
        ``YYYY-MM-DD HH:MM:SS.ffffff``, at half the cost of the composed ``astimezone``,
        ``replace`` and ``%`` format (a run's rows carry four timestamps, on the way of every
        synchronous call). Used only when the composed processor writes that very text for a
        probe; anything else (another zone, a naive value, None) goes through it unchanged."""
        process = super().bind_processor(dialect)
        if process is None or process(_PROBE) != _utc_text(_PROBE):
            return process

        def bind(value: Any) -> Any:
            if type(value) is datetime and value.tzinfo is UTC:
                return _utc_text(value)
            return process(value)

        return bind

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Base(DeclarativeBase):
    """The one declarative base of the control-plane schema."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        datetime: UtcDateTime(),
        dict[str, Any]: JSON(),
        list[Any]: JSON(),
    }


def created_at_column() -> Mapped[datetime]:
    """A creation timestamp: set by the service, else by the database at insert time."""
    return mapped_column(UtcDateTime(), server_default=func.now(), nullable=False)
