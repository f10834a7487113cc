"""Group commit: one asyncio task gathers writes and commits them in batches.

Callers on the event loop ``submit`` an operation and get a future that resolves once the
transaction holding it has committed (or with the operation's own error). The writer task takes
everything queued at that moment (at most ``max_rows``; after waiting ``linger_s`` for more
when configured), applies it in one transaction in a single database thread, commits, and
resolves the futures. When the loop is idle a write commits at once; under load, writes that
arrive while a commit runs share the next one, so commits per second stay bounded while rows
per second grow.

A batch whose transaction fails (one bad row: an unknown tenant, a constraint) is retried one
operation per transaction, so only the bad operation's caller sees the error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy.orm import Session, sessionmaker

from control.runtime.clock import perf_counter
from db.session import session_scope

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriterConfig:
    max_rows: int = field(default=512, metadata={"help": "most operations in one transaction"})
    linger_s: float = field(
        default=0.0,
        metadata={"help": "wait this long for more operations before a commit (0: commit as "
                  "soon as the database thread is free; batches form while it is busy)"},
    )  # fmt: skip

    def __post_init__(self) -> None:
        if self.max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {self.max_rows}")
        if self.linger_s < 0:
            raise ValueError(f"linger_s must be >= 0, got {self.linger_s}")


class BatchApplier(Protocol):
    """Applies operations inside one open transaction; returns one outcome per operation, in
    order (a value, or an exception instance that becomes that operation's error)."""

    def __call__(self, session: Session, ops: Sequence[Any]) -> list[Any]: ...


#: A marker operation: its future resolves once everything queued before it has committed.
_FLUSH = object()


@dataclass
class _Pending:
    op: Any
    future: asyncio.Future


class GroupCommitWriter:
    """Commits operations in batches through ``apply`` on one database thread."""

    def __init__(
        self,
        factory: sessionmaker[Session],
        apply: BatchApplier,
        config: WriterConfig = WriterConfig(),
    ) -> None:
        self._factory = factory
        self._apply = apply
        self.config = config
        self._queue: asyncio.Queue[_Pending | None] | None = None
        self._task: asyncio.Task | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="group-commit")
        self.commits = 0
        self.rows = 0
        self.busy_s = 0.0  # time spent in transactions (the database thread's load)

    # ---- lifecycle (event loop)
    def start(self) -> None:
        """Start the writer task on the running loop (idempotent)."""
        if self._task is None:
            self._queue = asyncio.Queue()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Commit everything queued, then end the task and the database thread."""
        if self._task is not None and self._queue is not None:
            self._queue.put_nowait(None)
            await self._task
            self._task = None
        self._thread.shutdown(wait=True)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    # ---- callers (event loop)
    def submit(self, op: Any) -> asyncio.Future:
        """Queue ``op``; the future resolves after its commit. Never blocks."""
        if self._queue is None or not self.running:
            raise RuntimeError("the group-commit writer is not running: call start() first")
        future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Pending(op, future))
        return future

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

    # ---- the task
    async def _run(self) -> None:
        assert self._queue is not None
        stopping = False
        while not stopping:
            first = await self._queue.get()
            batch = [] if first is None else [first]
            stopping = first is None
            if self.config.linger_s > 0 and not stopping:
                await asyncio.sleep(self.config.linger_s)
            while not self._queue.empty() and len(batch) < self.config.max_rows:
                item = self._queue.get_nowait()
                if item is None:
                    stopping = True
                    continue
                batch.append(item)
            if batch:
                await self._commit(batch)
        while not self._queue.empty():  # late submissions after stop: refuse, never drop
            item = self._queue.get_nowait()
            if item is not None and not item.future.done():
                item.future.set_exception(RuntimeError("the writer stopped before this commit"))

    async def _commit(self, everything: list[_Pending]) -> None:
        loop = asyncio.get_running_loop()
        batch = [p for p in everything if p.op is not _FLUSH]
        ops = [p.op for p in batch]
        if not ops:
            outcomes: list[Any] = []
        else:
            outcomes = await self._outcomes(loop, ops)
        for pending, outcome in zip(batch, outcomes, strict=True):
            if pending.future.done():
                continue
            if isinstance(outcome, BaseException):
                pending.future.set_exception(outcome)
            else:
                pending.future.set_result(outcome)
        for pending in everything:
            if pending.op is _FLUSH and not pending.future.done():
                pending.future.set_result(None)

    async def _outcomes(self, loop: asyncio.AbstractEventLoop, ops: list[Any]) -> list[Any]:
        try:
            outcomes = await loop.run_in_executor(self._thread, self._transaction, ops)
        except Exception as exc:
            log.warning("batch of %d failed (%s); retrying one operation per transaction",
                        len(ops), exc)  # fmt: skip
            outcomes = [await loop.run_in_executor(self._thread, self._alone, op) for op in ops]
        self.commits += 1
        self.rows += len(ops)
        return outcomes

    def _transaction(self, ops: list[Any]) -> list[Any]:
        started = perf_counter()
        try:
            with session_scope(self._factory) as session:
                return self._apply(session, ops)
        finally:
            self.busy_s += perf_counter() - started

    def _alone(self, op: Any) -> Any:
        try:
            return self._transaction([op])[0]
        except Exception as exc:  # this operation's own error, for its caller
            return exc
