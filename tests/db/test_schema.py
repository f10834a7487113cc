"""The schema follows the data rules of the architecture guide (checked without a database)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from setuptools import find_packages
from sqlalchemy import Integer
from sqlalchemy.dialects import postgresql, sqlite

import db.models  # noqa: F401
from db.base import Base, UtcDateTime
from db.migrate import MIGRATIONS_DIR

ROOT = Path(__file__).resolve().parents[2]
TABLES = Base.metadata.sorted_tables
QUANTITY = re.compile(r"(_mib|_ms|_us|_tokens|_milli|_units|_s|^nominal|_limit|^num_|^replicas)$")


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_table_names_are_plural_snake_case(table) -> None:
    assert re.fullmatch(r"[a-z]+(_[a-z]+)*s", table.name), table.name


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_every_constraint_and_index_has_a_conventional_name(table) -> None:
    prefixes = {"PrimaryKeyConstraint": "pk_", "UniqueConstraint": "uq_",
                "CheckConstraint": "ck_", "ForeignKeyConstraint": "fk_"}  # fmt: skip
    for constraint in table.constraints:
        name = str(constraint.name)
        assert name.startswith(prefixes[type(constraint).__name__] + table.name), name
        assert len(name) <= 63, f"{name} is longer than PostgreSQL keeps"
    for index in table.indexes:
        assert str(index.name).startswith(f"ix_{table.name}"), index.name


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.name)
def test_quantities_are_integers_and_timestamps_are_utc_aware(table) -> None:
    for column in table.columns:
        if QUANTITY.search(column.name):
            assert isinstance(column.type, Integer), f"{table.name}.{column.name}"
        if column.name.endswith("_at") or column.name == "at":
            assert isinstance(column.type, UtcDateTime), f"{table.name}.{column.name}"


def test_the_migrations_ship_inside_the_package() -> None:
    packages = find_packages(str(ROOT), include=["db*"])
    assert {"db.migrations", "db.migrations.versions"} <= set(packages)
    assert MIGRATIONS_DIR == ROOT / "db" / "migrations"
    assert (MIGRATIONS_DIR / "env.py").is_file()
    assert (MIGRATIONS_DIR / "script.py.mako").is_file()
    assert list((MIGRATIONS_DIR / "versions").glob("0001_*.py"))


def test_alembic_ini_holds_no_database_url() -> None:
    ini = (ROOT / "db" / "alembic.ini").read_text()
    assert "sqlalchemy.url" not in ini


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 11, 30, 18, 5, 7, 123456, tzinfo=UTC),
        datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),  # no microseconds: still six digits
        datetime(987, 6, 5, 4, 3, 2, 1, tzinfo=UTC),  # a year of three digits
        datetime(2026, 11, 30, 20, 5, 7, 42, tzinfo=timezone(timedelta(hours=2))),
        None,
    ],
)
def test_utc_timestamps_bind_on_sqlite_as_the_composed_processor_does(value) -> None:
    """UtcDateTime's direct text for UTC datetimes on SQLite is exactly what the composed
    processor (zone conversion, then SQLite's DATETIME format) stores."""
    dialect = sqlite.dialect()
    column_type = UtcDateTime().dialect_impl(dialect)  # as statements use it
    composed = super(UtcDateTime, column_type).bind_processor(dialect)
    assert composed is not None and isinstance(composed(datetime.now(UTC)), str)
    assert column_type.bind_processor(dialect)(value) == composed(value)


def test_utc_timestamps_keep_the_composed_processor_off_sqlite() -> None:
    """Where the composed processor does not write SQLite's text, it is used as it is."""
    dialect = postgresql.dialect()
    column_type = UtcDateTime().dialect_impl(dialect)
    value = datetime(2026, 11, 30, 18, 5, 7, tzinfo=UTC)
    processor = column_type.bind_processor(dialect)
    assert processor is None or processor(value) == value


def test_utc_timestamps_refuse_naive_values_on_sqlite_too() -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        dialect = sqlite.dialect()
        UtcDateTime().dialect_impl(dialect).bind_processor(dialect)(datetime(2026, 1, 1))
