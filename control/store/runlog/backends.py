"""Where the writer's transactions run: one backend per database kind.

* :class:`CoreBackend`: a session's transaction (``session_scope``: SQLite's ``BEGIN
  IMMEDIATE``, a SAVEPOINT when the factory is bound to an open connection, as in tests), the
  Core statements on its connection. PostgreSQL, SQLite in memory, and a SQLite file with
  ``raw_sqlite`` off.
* :class:`~control.store.runlog.sqlite_file.SqliteFileBackend`: a SQLite file, raw ``sqlite3``.

A backend's ``transaction`` runs on the writer's database thread, commits ``ops`` and returns
one outcome each, or raises with nothing written; ``inline`` (loop thread) may commit a small
batch at once or return None (nothing written).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from control.store.runlog.apply import apply_ops
from control.store.runlog.config import WriterConfig
from control.store.runlog.core_sql import CoreStatements
from control.store.runlog.sqlite_file import SqliteFileBackend
from db.session import is_sqlite_file, session_scope


class Backend(Protocol):
    inline_commits: int  # commits made on the loop thread
    checkpoints: int  # WAL checkpoints run for them

    def transaction(self, ops: Sequence[Any]) -> list[Any]:
        """Commit ``ops`` in one transaction (database thread); raises, nothing written."""
        ...

    def inline(self, ops: Sequence[Any]) -> list[Any] | None:
        """Commit ``ops`` on the loop thread now, or None (nothing written)."""
        ...

    def checkpoint_due(self) -> bool:
        """Whether the database thread should run ``checkpoint`` now (asked after inline)."""
        ...

    def checkpoint(self) -> None:
        """Housekeeping of the inline commits (database thread); never raises."""
        ...

    def close_inline(self) -> None:
        """Give back what the loop thread holds (loop thread)."""
        ...

    def close(self) -> None:
        """Give back what the database thread holds (database thread)."""
        ...


class CoreBackend:
    """Each batch in a session's transaction, through the Core statements."""

    inline_commits = 0
    checkpoints = 0

    def __init__(self, factory: sessionmaker[Session]) -> None:
        self.factory = factory

    def transaction(self, ops: Sequence[Any]) -> list[Any]:
        with session_scope(self.factory) as session:
            return apply_ops(CoreStatements(session.connection()), ops)

    def inline(self, ops: Sequence[Any]) -> list[Any] | None:
        return None

    def checkpoint_due(self) -> bool:
        return False

    def checkpoint(self) -> None:
        pass

    def close_inline(self) -> None:
        pass

    def close(self) -> None:
        pass


def sqlite_file_engine(factory: sessionmaker[Session]) -> Engine | None:
    """The engine ``factory`` is bound to when it is a SQLite file's, else None."""
    bind = factory.kw.get("bind")
    return bind if isinstance(bind, Engine) and is_sqlite_file(bind.url) else None


def backend_for(factory: sessionmaker[Session], config: WriterConfig) -> Backend:
    """The backend of ``factory``'s database under ``config``."""
    engine = sqlite_file_engine(factory)
    if engine is not None and config.raw_sqlite:
        return SqliteFileBackend(engine, config)
    return CoreBackend(factory)
