"""Engines, session factories and the unit-of-work scope.

SQLite is the embedded default: WAL journal (readers do not block the writer), foreign keys on,
a busy timeout, and transactions that SQLAlchemy (not the sqlite3 module) begins, so that
SAVEPOINTs work; each begins IMMEDIATE, so concurrent writers queue for the lock instead of
failing. PostgreSQL is reached through psycopg 3.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from db import json_codec

#: How long a SQLite writer waits for another writer's lock before giving up.
SQLITE_BUSY_TIMEOUT_MS = 5000


def normalize_url(url: str) -> str:
    """The URL with a driver SQLAlchemy can use here: plain ``postgresql://`` means psycopg 3."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def _sqlite_file(url: str) -> Path | None:
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def is_sqlite_file(url: Any) -> bool:
    """Whether ``url`` (text or URL) names a SQLite database file (not memory, not a URI)."""
    url = make_url(url) if isinstance(url, str) else url
    return url.get_backend_name() == "sqlite" and _sqlite_file(url.render_as_string()) is not None


def _on_sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Hand transaction control to SQLAlchemy: the sqlite3 module's own implicit BEGIN would
    # otherwise break SAVEPOINT and transactional DDL.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # In WAL mode NORMAL cannot corrupt the file; a power cut may lose the last commits. The
    # embedded database serves one machine; production durability is PostgreSQL's job.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.close()


def _on_sqlite_begin(connection: Any) -> None:
    # IMMEDIATE takes the write lock up front, waiting out the busy timeout. A deferred BEGIN
    # would let a read-check-write unit of work fail at once with "database is locked" when
    # another connection committed after its first read (WAL cannot upgrade a stale snapshot),
    # and the busy timeout does not apply to that case.
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str, **kwargs: Any) -> Engine:
    """Create an engine for ``url``.

    JSON columns use :mod:`db.json_codec`. SQLite: creates the file's parent folder, turns on WAL, foreign keys and a busy timeout on
    every connection. PostgreSQL: psycopg 3 with pre-ping. ``kwargs`` go to ``create_engine``.
    """
    url = normalize_url(url)
    backend = make_url(url).get_backend_name()
    # JSON columns (run results on every synchronous caller's path) through orjson
    kwargs.setdefault("json_serializer", json_codec.dumps)
    kwargs.setdefault("json_deserializer", json_codec.loads)
    if backend == "sqlite":
        path = _sqlite_file(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, **kwargs)
        event.listen(engine, "connect", _on_sqlite_connect)
        event.listen(engine, "begin", _on_sqlite_begin)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions bound to ``engine``; rows stay readable after commit (no expiry)."""
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One transaction: commit when the block ends normally, roll back on any exception
    (which is re-raised), close the session either way."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
