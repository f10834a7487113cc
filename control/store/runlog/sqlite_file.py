"""A SQLite file's backend: raw ``sqlite3`` transactions, and inline commits on the loop.

Transactions (database thread) run on one raw connection the thread keeps (``BEGIN
IMMEDIATE`` ... ``COMMIT``, as the session would; the pool's connect events set the pragmas),
through :mod:`.sqlite_sql`. One that raises is rolled back and its error re-raised (a
connection that cannot even roll back is discarded).

Inline commits (the ``inline_commits`` fast path, ``inline_max_rows`` > 0): a small batch found
while the database thread is idle commits on the loop thread itself, through a second raw
connection that never waits for the write lock (busy timeout 0) and leaves WAL checkpoints to
the database thread. Why: the thread's commit costs two thread hand-offs (~0.1-0.2 ms each on a
busy machine) on the path of every synchronous caller, for a transaction of ~0.3 ms that holds
the interpreter lock most of the time anyway. When another writer holds the lock, or anything
fails, nothing is written and the writer hands the batch to the database thread, whose
outcomes (errors included) are the reference. The loop's connection has automatic checkpoints
off; every ``checkpoint_every`` inline commits the database thread checkpoints (see
:meth:`SqliteFileBackend.checkpoint`): without that the WAL grew ~32 KB a run, never reset.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, exc

from control.store.runlog.apply import apply_ops
from control.store.runlog.config import WriterConfig
from control.store.runlog.sqlite_sql import SqliteDialectSql, SqliteStatements
from db.session import SQLITE_BUSY_TIMEOUT_MS

log = logging.getLogger("control.store.runlog.writer")

#: The longest a WAL checkpoint of the inline commits waits for a writer or a reader in its
#: way (milliseconds): writers queue behind it meanwhile, so it must stay short.
CHECKPOINT_WAIT_MS = 20


class SqliteFileBackend:
    """Raw transactions on the database thread's connection; inline ones on the loop's."""

    def __init__(self, engine: Engine, config: WriterConfig) -> None:
        self.engine = engine
        self.sql = SqliteDialectSql(engine.dialect)
        self.inline_max_rows = config.inline_max_rows
        self.checkpoint_every = config.checkpoint_every
        self._conn: Any = None  # the pooled connection the database thread keeps
        self._inline_conn: Any = None  # the pooled connection the loop commits on
        self.inline_commits = 0
        self.checkpoints = 0
        self._since_checkpoint = 0
        self._checkpoint_queued = False  # set on the loop, cleared by the database thread

    # ---- the database thread
    def transaction(self, ops: Sequence[Any]) -> list[Any]:
        if self._conn is None:
            self._conn = self.engine.raw_connection()
        try:
            return self._commit(self._conn, ops)
        finally:
            if not self._conn.is_valid:
                self.close()

    def checkpoint(self) -> None:
        """Checkpoint the WAL on the database thread's connection, so that the next writer
        starts it from its beginning again. RESTART, because a passive one never completed: an
        inline commit always landed while it ran, and the WAL is only reset by a writer that
        finds it wholly copied. It waits at most ``CHECKPOINT_WAIT_MS`` for the writer in its
        way (an inline commit takes well under a millisecond) and for readers of older
        snapshots; past that it copies what it can, and the next round tries again. While it
        runs, an inline commit finds the lock taken and hands its batch to this thread."""
        try:
            if self._conn is None:
                self._conn = self.engine.raw_connection()
            conn = self._conn.driver_connection
            conn.execute(f"PRAGMA busy_timeout={CHECKPOINT_WAIT_MS}")
            try:
                conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
            finally:
                conn.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            self.checkpoints += 1
        except Exception as exc:  # the next round tries again; commits go on meanwhile
            log.warning("WAL checkpoint failed: %s", exc)
        finally:
            self._checkpoint_queued = False

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()  # back to the pool

    # ---- the loop thread
    def inline(self, ops: Sequence[Any]) -> list[Any] | None:
        """``ops`` committed on the loop thread, or None (nothing written) when the batch is
        too large, the write lock is taken or anything fails."""
        if len(ops) > self.inline_max_rows:
            return None
        try:
            if self._inline_conn is None:
                self._inline_conn = self.engine.raw_connection()
                conn = self._inline_conn.driver_connection
                conn.execute("PRAGMA busy_timeout=0")  # never wait on the loop
                conn.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints: the thread's
            outcomes = self._commit(self._inline_conn, ops)
        except Exception as exc:
            log.debug("inline commit not made (%s); using the database thread", exc)
            outcomes = None
        if self._inline_conn is not None and not self._inline_conn.is_valid:
            pooled, self._inline_conn = self._inline_conn, None
            pooled.close()
        if outcomes is not None:
            self.inline_commits += 1
            self._since_checkpoint += 1
        return outcomes

    def checkpoint_due(self) -> bool:
        """True once every ``checkpoint_every`` inline commits (until that one has run)."""
        if self._checkpoint_queued or self._since_checkpoint < self.checkpoint_every:
            return False
        self._checkpoint_queued = True
        self._since_checkpoint = 0
        return True

    def close_inline(self) -> None:
        """Give the inline connection back to the pool with the engine's own settings."""
        if self._inline_conn is None:
            return
        pooled, self._inline_conn = self._inline_conn, None
        try:
            conn = pooled.driver_connection
            conn.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA wal_autocheckpoint=1000")
        except Exception:
            pooled.invalidate()
        pooled.close()

    def _commit(self, pooled: Any, ops: Sequence[Any]) -> list[Any]:
        """``ops`` in one transaction on ``pooled`` (``BEGIN IMMEDIATE`` takes the write lock,
        as the session's begin does); on any error it is rolled back (or the connection
        invalidated when it cannot be) and the error re-raised."""
        conn = pooled.driver_connection
        _execute(conn, "BEGIN IMMEDIATE")
        statements = SqliteStatements(self.sql, conn)
        try:
            outcomes = apply_ops(statements, ops)
            _execute(conn, "COMMIT")
            return outcomes
        except BaseException:
            if not _rolled_back(conn):
                pooled.invalidate()
            raise
        finally:
            statements.close()


def _execute(conn: Any, text: str) -> None:
    try:
        conn.execute(text)
    except sqlite3.Error as err:  # "database is locked": SQLAlchemy's OperationalError
        raise exc.DBAPIError.instance(text, (), err, sqlite3.Error) from err


def _rolled_back(conn: Any) -> bool:
    """Roll back whatever transaction is open on a raw connection; False when it cannot (the
    caller then discards the connection)."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return True
    except Exception:
        return False
