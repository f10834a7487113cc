"""Schema migrations as plain functions (the CLI and the tests call these).

Every function takes a database URL, opens its own engine and closes it again. Alembic's
configuration is built in code, pointing at the ``migrations`` folder shipped in this package.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

import db.models  # noqa: F401  (fills Base.metadata)
from db.base import Base
from db.session import make_engine

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` using the packaged migration scripts."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the schema at ``url`` up to ``revision`` (creating it on an empty database)."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    """Take the schema at ``url`` down to ``revision`` ("base" drops every table)."""
    command.downgrade(alembic_config(url), revision)


def head() -> str:
    """The newest revision shipped with this package."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    current_head = script.get_current_head()
    assert current_head is not None, "the package ships no migration"
    return current_head


def current(url: str) -> str | None:
    """The revision the database at ``url`` is at, or None for an unmigrated database."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def check(url: str) -> list[str]:
    """Differences between the models and the schema at ``url``; empty means no drift.

    Reports a database behind the shipped head first, then every difference Alembic's
    autogenerate comparison finds (tables, columns, types, indexes, unique constraints).
    """
    problems: list[str] = []
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            at = context.get_current_revision()
            if at != head():
                problems.append(f"database is at revision {at!r}, the code expects {head()!r}")
            problems.extend(_describe(diff) for diff in compare_metadata(context, Base.metadata))
    finally:
        engine.dispose()
    return problems


def _describe(diff: object) -> str:
    # compare_metadata yields tuples, or lists of tuples for column-level changes.
    if isinstance(diff, list):
        return "; ".join(_describe(item) for item in diff)
    if isinstance(diff, tuple) and diff:
        return f"{diff[0]}: " + ", ".join(str(part) for part in diff[1:])
    return str(diff)
