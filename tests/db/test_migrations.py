"""Migrations build the schema from nothing on both backends, with no drift from the models."""

from __future__ import annotations

from sqlalchemy import inspect

from db import migrate
from db.base import Base
from db.session import make_engine


def _tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def test_upgrade_from_empty_reaches_head_without_drift(empty_db_url: str) -> None:
    assert migrate.current(empty_db_url) is None
    migrate.upgrade(empty_db_url)
    assert migrate.current(empty_db_url) == migrate.head()
    assert _tables(empty_db_url) == set(Base.metadata.tables)
    assert migrate.check(empty_db_url) == []


def test_check_reports_an_unmigrated_database(empty_db_url: str) -> None:
    problems = migrate.check(empty_db_url)
    assert any("expects" in p for p in problems)
    assert any("add_table: tenants" in p for p in problems)


def test_downgrade_to_base_removes_every_table_and_upgrade_restores(empty_db_url: str) -> None:
    migrate.upgrade(empty_db_url)
    migrate.downgrade(empty_db_url, "base")
    assert migrate.current(empty_db_url) is None
    assert _tables(empty_db_url) == set()
    migrate.upgrade(empty_db_url)
    assert migrate.check(empty_db_url) == []


def test_check_notices_a_column_the_migrations_do_not_have(empty_db_url: str) -> None:
    migrate.upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE tenants ADD COLUMN stray INTEGER")
    finally:
        engine.dispose()
    assert any("stray" in p for p in migrate.check(empty_db_url))
