"""Group commit: writes gathered on the event loop are committed in batches on one thread.

Callers on the event loop ``submit`` an operation and get a future that resolves once the
transaction holding it has committed (or with the operation's own error). The writer takes
everything queued at that moment (at most ``max_rows``; after waiting ``linger_s`` for more
when configured), applies it in one transaction in a single database thread, commits, and
resolves the futures. When the loop is idle a write commits at once; under load, writes that
arrive while a commit runs share the next one, so commits per second stay bounded while rows
per second grow.

A batch whose transaction fails (one bad row: an unknown tenant, a constraint) is retried one
operation per transaction, so only the bad operation's caller sees the error.

Inline commits (SQLite file, raw applier): a small batch (``inline_max_rows``) found while the
database thread is idle commits on the loop thread itself, through a second raw connection
that never waits for the write lock (busy timeout 0) and leaves WAL checkpoints to the
database thread: every ``checkpoint_every`` inline commits it checkpoints there (see
``_checkpoint``). The loop's connection has automatic checkpoints off, and when every commit was
inline nothing else checkpointed: the WAL grew by ~32 KB a run (100 MB per 3,000 runs), never
reset. Why inline: the thread's commit cost two thread hand-offs (~0.1-0.2 ms
each on a busy machine) on the path of every synchronous caller, for a transaction of ~0.3 ms
that held the interpreter lock most of the time anyway. When another writer holds the lock, or
the raw applier declines or fails, the batch goes to the database thread exactly as before.

On a SQLite file an optional ``raw`` applier runs each transaction on one raw ``sqlite3``
connection that the database thread keeps (``BEGIN IMMEDIATE`` ... ``COMMIT``, as the
session would), skipping the session and statement machinery that cost most of a commit's CPU.
A batch it declines (returns None) or that raises is rolled back and applied through the
session path, so unusual outcomes and errors are exactly the session path's.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import Engine
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session, sessionmaker

from control.clock import perf_counter
from db.session import SQLITE_BUSY_TIMEOUT_MS, is_sqlite_file, session_scope

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriterConfig:
    max_rows: int = field(default=512, metadata={"help": "most operations in one transaction"})
    linger_s: float = field(
        default=0.0,
        metadata={"help": "wait this long for more operations before a commit (0: commit as "
                  "soon as the database thread is free; batches form while it is busy)"},
    )  # fmt: skip
    inline_max_rows: int = field(
        default=8,
        metadata={"help": "largest batch committed on the event loop itself while the "
                  "database thread is idle (SQLite file only; 0: never)"},
    )  # fmt: skip
    checkpoint_every: int = field(
        default=128,
        metadata={"help": "inline commits between two WAL checkpoints, run on the database "
                  "thread (the loop's connection never checkpoints itself)"},
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {self.max_rows}")
        if self.inline_max_rows < 0:
            raise ValueError(f"inline_max_rows must be >= 0, got {self.inline_max_rows}")
        if self.linger_s < 0:
            raise ValueError(f"linger_s must be >= 0, got {self.linger_s}")
        if self.checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be >= 1, got {self.checkpoint_every}")


class BatchApplier(Protocol):
    """Applies operations inside one open transaction; returns one outcome per operation, in
    order (a value, or an exception instance that becomes that operation's error)."""

    def __call__(self, session: Session, ops: Sequence[Any]) -> list[Any]: ...


class RawApplier(Protocol):
    """Applies operations inside a transaction open on a raw DBAPI connection; returns one
    outcome per operation, or None to have the batch applied through the session path."""

    def __call__(self, connection: Any, ops: Sequence[Any]) -> list[Any] | None: ...


#: The longest a WAL checkpoint of the inline commits waits for a writer or a reader in its
#: way (milliseconds): writers queue behind it meanwhile, so it must stay short.
CHECKPOINT_WAIT_MS = 20

#: A marker operation: its future resolves once everything queued before it has committed.
_FLUSH = object()


@dataclass
class _Pending:
    op: Any
    future: asyncio.Future
    then: Callable[[asyncio.Future], None] | None = None  # called as the future resolves


class GroupCommitWriter:
    """Commits operations in batches through ``apply`` on one database thread.

    Driven by callbacks, not a task: a submit on an idle writer schedules the batch for the
    loop's next turn (so that everything submitted in this turn shares it), and the database
    thread hands the outcomes straight back to the loop; each commit thus costs one hop to the
    thread and one back, with no task to wake in between.
    """

    def __init__(
        self,
        factory: sessionmaker[Session],
        apply: BatchApplier,
        config: WriterConfig = WriterConfig(),
        raw: Callable[[Dialect], RawApplier | None] | None = None,
    ) -> None:
        """``raw`` builds the raw applier for the engine's dialect (None: not this backend)."""
        self._factory = factory
        self._apply = apply
        self.config = config
        bind = factory.kw.get("bind")
        self._engine = bind if isinstance(bind, Engine) and is_sqlite_file(bind.url) else None
        self._raw = raw(self._engine.dialect) if raw and self._engine is not None else None
        self._raw_conn: Any = None  # the pooled connection the database thread keeps
        self._inline_conn: Any = None  # the pooled connection the loop commits on (inline)
        self.inline_commits = 0  # commits made on the loop thread (see inline_max_rows)
        self.checkpoints = 0  # WAL checkpoints run for the inline commits (see _checkpoint)
        self._inline_since_checkpoint = 0
        self._checkpoint_queued = False  # set on the loop, cleared by the database thread
        self.raw_fallbacks = 0  # batches the raw applier handed to the session path
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: deque[_Pending] = deque()
        self._scheduled = False  # a batch start is scheduled on the loop
        self._begin_handle: asyncio.Handle | None = None  # that start (see commit_now)
        self._busy = False  # a batch is on the database thread
        self._stopping = False
        self._idle: asyncio.Future | None = None  # stop() waits for the last commit
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="group-commit")
        self.commits = 0
        self.rows = 0
        self.busy_s = 0.0  # time spent in transactions (the database thread's load)

    # ---- lifecycle (event loop)
    def start(self) -> None:
        """Start taking operations on the running loop (idempotent)."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()

    async def stop(self) -> None:
        """Commit everything queued, then end the database thread. Operations submitted
        from now on are refused (their future fails), never dropped silently."""
        if self._loop is not None and not self._stopping:
            self._stopping = True
            if self._busy or self._scheduled or self._queue:
                self._idle = self._loop.create_future()
                self._schedule()
                await self._idle
        self._close_inline()
        self._thread.submit(self._close_raw)
        self._thread.shutdown(wait=True)

    @property
    def running(self) -> bool:
        return self._loop is not None and not self._stopping

    # ---- callers (event loop)
    def submit(
        self, op: Any, then: Callable[[asyncio.Future], None] | None = None
    ) -> asyncio.Future:
        """Queue ``op``; the future resolves after its commit. Never blocks. ``then(future)``,
        when given, is called as the future resolves, in the same loop iteration (a done
        callback would wait for the next one): the commit's waiters hear of it sooner. It
        must not block; an exception it raises is logged."""
        if self._loop is None:
            raise RuntimeError("the group-commit writer is not running: call start() first")
        future = self._loop.create_future()
        if self._stopping:
            future.set_exception(RuntimeError("the writer stopped before this commit"))
            if then is not None:
                future.add_done_callback(then)
            return future
        self._queue.append(_Pending(op, future, then))
        self._schedule()
        return future

    def commit_now(self) -> None:
        """Start the batch scheduled for the loop's next iteration now (loop thread): for a
        caller that knows nothing more will be queued in this iteration, e.g. at the end of
        the driver's turn, whose run ends the batch holds. Why: the commit, and the caller
        waiting for it, then come one loop iteration sooner. No-op when nothing is scheduled
        or ``linger_s`` is set (the linger is the point then)."""
        handle = self._begin_handle
        if handle is not None and self.config.linger_s == 0:
            handle.cancel()
            self._begin()

    async def write(self, op: Any) -> Any:
        """Queue ``op`` and wait for its commit; raises the operation's error."""
        return await self.submit(op)

    async def flush(self) -> None:
        """Wait until every operation queued before this call has committed."""
        await self.submit(_FLUSH)

    async def run_in_db_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` on the writer's database thread (reads that must see every
        committed write, recovery at start-up)."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    # ---- batches (loop side)
    def _schedule(self) -> None:
        """Start the next batch on a later loop turn (after ``linger_s`` when configured),
        unless one is running (its end starts the next) or already scheduled."""
        if self._busy or self._scheduled or self._loop is None:
            return
        self._scheduled = True
        linger = self.config.linger_s
        if linger > 0 and not self._stopping:
            self._loop.call_later(linger, self._begin)
        else:
            self._begin_handle = self._loop.call_soon(self._begin)

    def _begin(self) -> None:
        self._scheduled = False
        self._begin_handle = None
        batch: list[_Pending] = []
        while self._queue and len(batch) < self.config.max_rows:
            batch.append(self._queue.popleft())
        if not batch:
            self._settled_all()
            return
        ops = [p.op for p in batch if p.op is not _FLUSH]
        if not ops:  # only flush markers: everything before them has committed
            self._done(batch, [])
            return
        if self._raw is not None and len(ops) <= self.config.inline_max_rows:
            outcomes = self._inline_transaction(ops)
            if outcomes is not None:
                self._done(batch, outcomes)
                return
        self._busy = True
        self._thread.submit(self._work, batch, ops)

    # ---- inline commits (loop thread; only while the database thread is idle)
    def _inline_transaction(self, ops: list[Any]) -> list[Any] | None:
        """``ops`` committed on the loop thread, or None (nothing written) when the write lock
        is taken, the raw applier declines or anything fails: the caller then hands them to
        the database thread, whose outcomes (errors included) are the reference."""
        assert self._raw is not None and self._engine is not None
        started = perf_counter()
        try:
            if self._inline_conn is None:
                self._inline_conn = self._engine.raw_connection()
                conn = self._inline_conn.driver_connection
                conn.execute("PRAGMA busy_timeout=0")  # never wait on the loop
                conn.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints: the thread's
            outcomes = self._raw_commit(self._inline_conn, ops)
        except Exception as exc:  # no connection to be had
            log.debug("inline commit not started (%s); using the database thread", exc)
            return None
        finally:
            self.busy_s += perf_counter() - started
        if not self._inline_conn.is_valid:
            pooled, self._inline_conn = self._inline_conn, None
            pooled.close()
        if outcomes is None:
            return None
        self.commits += 1
        self.inline_commits += 1
        self.rows += len(ops)
        self._inline_since_checkpoint += 1
        if self._inline_since_checkpoint >= self.config.checkpoint_every:
            self._queue_checkpoint()
        return outcomes

    def _queue_checkpoint(self) -> None:
        """Have the database thread checkpoint the WAL (behind any batch it runs), once."""
        if self._checkpoint_queued:
            return
        self._checkpoint_queued = True
        self._inline_since_checkpoint = 0
        self._thread.submit(self._checkpoint)

    def _close_inline(self) -> None:
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

    def _done(self, batch: list[_Pending], outcomes: list[Any]) -> None:
        """Resolve the batch's futures (loop thread), then go on with what came meanwhile."""
        self._busy = False
        results = iter(outcomes)
        for pending in batch:
            outcome = None if pending.op is _FLUSH else next(results)
            if not pending.future.done():
                if isinstance(outcome, BaseException):
                    pending.future.set_exception(outcome)
                else:
                    pending.future.set_result(outcome)
            if pending.then is not None:
                try:
                    pending.then(pending.future)
                except Exception:  # the caller's bug must not stop the other outcomes
                    log.exception("commit callback %r failed", pending.then)
        if self._queue:
            self._schedule()
        else:
            self._settled_all()

    def _settled_all(self) -> None:
        if self._idle is not None and not self._idle.done() and not self._queue:
            self._idle.set_result(None)

    # ---- the database thread
    def _work(self, batch: list[_Pending], ops: list[Any]) -> None:
        """Commit ``ops`` (one operation per transaction after a failed batch) and hand the
        outcomes to the loop; never raises (an unexpected error fails every operation)."""
        try:
            try:
                outcomes = self._transaction(ops)
            except Exception as exc:
                log.warning("batch of %d failed (%s); retrying one operation per transaction",
                            len(ops), exc)  # fmt: skip
                outcomes = [self._alone(op) for op in ops]
            self.commits += 1
            self.rows += len(ops)
        except BaseException as exc:  # noqa: BLE001 - the callers must hear of it
            outcomes = [exc] * len(ops)
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._done, batch, outcomes)

    def _transaction(self, ops: list[Any]) -> list[Any]:
        started = perf_counter()
        try:
            if self._raw is not None:
                outcomes = self._raw_transaction(ops)
                if outcomes is not None:
                    return outcomes
                self.raw_fallbacks += 1
            with session_scope(self._factory) as session:
                return self._apply(session, ops)
        finally:
            self.busy_s += perf_counter() - started

    def _raw_transaction(self, ops: list[Any]) -> list[Any] | None:
        """``ops`` in one transaction on the kept raw connection; None (rolled back) when the
        raw applier declined them or raised: the session path then applies them."""
        assert self._raw is not None and self._engine is not None
        if self._raw_conn is None:
            self._raw_conn = self._engine.raw_connection()  # pool events set the pragmas
        outcomes = self._raw_commit(self._raw_conn, ops)
        if not self._raw_conn.is_valid:
            self._close_raw()
        return outcomes

    def _raw_commit(self, pooled: Any, ops: list[Any]) -> list[Any] | None:
        """``ops`` through the raw applier in one transaction on ``pooled`` (``BEGIN
        IMMEDIATE`` takes the write lock, as the session's begin does); None, with nothing
        written, when the lock is not had, the applier declines or anything raises. A
        connection that cannot even roll back is invalidated (the caller lets it go)."""
        assert self._raw is not None
        conn = pooled.driver_connection
        try:
            conn.execute("BEGIN IMMEDIATE")
            outcomes = self._raw(conn, ops)
            if outcomes is None:
                conn.execute("ROLLBACK")
                return None
            conn.execute("COMMIT")
            return outcomes
        except Exception as exc:
            log.debug("raw transaction of %d op(s) failed (%s)", len(ops), exc)
            if not _rolled_back(conn):
                pooled.invalidate()
            return None

    def _checkpoint(self) -> None:
        """Checkpoint the WAL on the database thread's connection (database thread), so that
        the next writer starts it from its beginning again. RESTART, because a passive one
        never completed: an inline commit always landed while it ran, and the WAL is only
        reset by a writer that finds it wholly copied. It waits at most ``CHECKPOINT_WAIT_MS``
        for the writer in its way (an inline commit takes well under a millisecond) and for
        readers of older snapshots; past that it copies what it can, like a passive one, and
        the next round tries again. While it runs, an inline commit finds the lock taken and
        hands its batch to this thread, behind it (a few milliseconds, once per round)."""
        try:
            if self._raw_conn is None:
                self._raw_conn = self._engine.raw_connection()  # type: ignore[union-attr]
            conn = self._raw_conn.driver_connection
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

    def _close_raw(self) -> None:
        if self._raw_conn is not None:
            conn, self._raw_conn = self._raw_conn, None
            conn.close()  # back to the pool

    def _alone(self, op: Any) -> Any:
        try:
            return self._transaction([op])[0]
        except Exception as exc:  # this operation's own error, for its caller
            return exc


def _rolled_back(conn: Any) -> bool:
    """Roll back whatever transaction is open on a raw connection; False when it cannot (the
    caller then discards the connection)."""
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return True
    except Exception:
        return False
