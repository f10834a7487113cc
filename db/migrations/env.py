"""Alembic environment for the control-plane schema.

The database is chosen by the caller, never by alembic.ini: ``db.migrate`` passes an open
connection (``config.attributes["connection"]``) or a URL (``config.attributes["url"]``); the
``alembic`` command line takes ``-x url=...`` or the ``LEGATO_DATABASE_URL`` variable.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy.engine import Connection

import db.models  # noqa: F401  (fills Base.metadata)
from db.base import Base
from db.session import make_engine

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = (
        config.attributes.get("url")
        or context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or os.environ.get("LEGATO_DATABASE_URL")
    )
    if not url:
        raise RuntimeError("no database URL: pass -x url=... or set LEGATO_DATABASE_URL")
    return url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        compare_type=True,
        render_as_batch=_url().startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(_url())
    try:
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
