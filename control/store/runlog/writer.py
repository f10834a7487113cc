"""Group commit: run-log operations gathered on the event loop commit in batches on one thread.

Contract. Callers on the event loop ``submit`` an operation (:mod:`.ops`) and get a future. It
resolves with the operation's outcome only once the transaction holding it has committed:
the row is then durable (PostgreSQL: on disk; a SQLite file in WAL with ``synchronous=NORMAL``:
survives the process, a power cut may lose the last commits). It resolves with the operation's
own error when that operation cannot be written, and then nothing of it was written.

The writer takes everything queued at that moment (at most ``max_rows``), applies it in one
transaction on a single database thread (or inline on the loop, see :mod:`.sqlite_file`),
commits, and resolves the futures. When the loop is idle a write commits at once; under load,
writes that arrive while a commit runs share the next one, so commits per second stay bounded
while rows per second grow. A batch whose transaction fails (one bad row: an unknown tenant, a
constraint) is retried one operation per transaction, so only the bad operation's caller sees
the error.

Driven by callbacks, not a task: a submit on an idle writer schedules the batch for the loop's
next turn (so that everything submitted in this turn shares it), and the database thread hands
the outcomes straight back to the loop; each commit costs one hop to the thread and one back.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from control.clock import perf_counter
from control.store.runlog.backends import Backend, backend_for
from control.store.runlog.config import WriterConfig

log = logging.getLogger(__name__)

#: A marker operation: its future resolves once everything queued before it has committed.
_FLUSH = object()


@dataclass
class _Pending:
    op: Any
    future: asyncio.Future
    then: Callable[[asyncio.Future], None] | None = None  # called as the future resolves


class GroupCommitWriter:
    """Commits run-log operations in batches on one database thread (see module doc).

    The backend (raw ``sqlite3`` for a SQLite file, Core otherwise) is chosen from ``config``
    at :meth:`start`."""

    def __init__(self, factory: sessionmaker[Session], config: WriterConfig = WriterConfig()):
        self._factory = factory
        self.config = config
        self._backend: Backend | None = None
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

    @property
    def inline_commits(self) -> int:
        """Commits made on the loop thread (see ``WriterConfig.inline_max_rows``)."""
        return self._backend.inline_commits if self._backend is not None else 0

    @property
    def checkpoints(self) -> int:
        """WAL checkpoints run for the inline commits."""
        return self._backend.checkpoints if self._backend is not None else 0

    # ---- lifecycle (event loop)
    def start(self) -> None:
        """Start taking operations on the running loop (idempotent)."""
        if self._loop is None:
            self._backend = backend_for(self._factory, self.config)
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
        if self._backend is not None:
            self._backend.close_inline()
            self._thread.submit(self._backend.close)
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
        or ``commit_at_turn_end`` is off."""
        handle = self._begin_handle
        if handle is not None and self.config.commit_at_turn_end:
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
        """Start the next batch on a later loop turn, unless one is running (its end starts
        the next) or already scheduled."""
        if self._busy or self._scheduled or self._loop is None:
            return
        self._scheduled = True
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
        if self._inline(batch, ops):
            return
        self._busy = True
        self._thread.submit(self._work, batch, ops)

    def _inline(self, batch: list[_Pending], ops: list[Any]) -> bool:
        """Commit ``ops`` on the loop when the backend can at once (the database thread is
        idle here); True when it did and the batch is resolved."""
        assert self._backend is not None
        started = perf_counter()
        outcomes = self._backend.inline(ops)
        self.busy_s += perf_counter() - started
        if outcomes is None:
            return False
        self.commits += 1
        self.rows += len(ops)
        if self._backend.checkpoint_due():
            self._thread.submit(self._backend.checkpoint)  # behind any batch it runs
        self._done(batch, outcomes)
        return True

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
        assert self._backend is not None
        started = perf_counter()
        try:
            return self._backend.transaction(ops)
        finally:
            self.busy_s += perf_counter() - started

    def _alone(self, op: Any) -> Any:
        try:
            return self._transaction([op])[0]
        except Exception as exc:  # this operation's own error, for its caller
            return exc
