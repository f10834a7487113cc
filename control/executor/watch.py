"""The watching half of :class:`~control.executor.local.LocalExecutor`: the pump thread that
reads every worker pipe, and what happens when a worker dies or hangs.

The pump thread waits on all worker pipes at once (``multiprocessing.connection.wait``) with a
tick of a fifth of the heartbeat interval; every message is handled under the executor's lock;
after each wake-up it checks every worker's health (see
:meth:`~control.executor.supervisor.WorkerHandle.health`). A worker found dead or hung is
killed, everything it held is reported lost (its batches' items failed-retriable), ``WorkerDown``
is emitted, and a fresh worker is started. The cause of each lost item says what happened to
ITS batch: when the worker hung, every batch it was running hung with it (``hang``: several
when batches joined one decode loop, all stuck in that loop), while batches still queued behind
them were only lost (``worker_down``); when it crashed, all are ``worker_down``. Kept apart
from ``pump.py`` only to keep modules small.
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing.connection
import select

from control import clock
from control.executor.base import LoadReport, WorkerDown

log = logging.getLogger(__name__)

#: Worker message kind -> the executor method handling it (looked up per message: building a
#: table of bound methods for every message cost more than the lookup of the one needed).
_HANDLERS = {
    "hb": "_on_heartbeat",
    "loaded": "_on_loaded",
    "load_failed": "_on_load_failed",
    "unloaded": "_on_unloaded",
    "results": "_on_results",
    "delta": "_on_delta",
    "exported": "_on_exported",
    "fetched": "_on_fetched",
    "started": "_on_started",
    "cancelled": "_on_cancelled",
}

#: Most messages read from one worker pipe before the pump looks at the others.
_MAX_DRAIN = 256


class WatchMixin:
    # ---- the pump thread ----------------------------------------------------------------------

    def _pump_loop(self) -> None:
        tick = self.config.heartbeat_s / 5
        checked = clock.monotonic()
        while not self._stopping.is_set():
            with self._lock:
                reads = self._pump_reads()  # False once the loop reads them (see attach)
                conns = {h.conn: h for h in self._workers.values() if h.conn is not None}
            if not reads:
                conns = {}
            ready = multiprocessing.connection.wait(list(conns), timeout=tick) if conns else []
            if not conns:
                self._stopping.wait(tick)
            for conn in ready:
                self._drain(conn, conns[conn])
            now = clock.monotonic()
            # A pump that itself ran late (a starved process on a loaded machine) has not been
            # listening: silence measured across that gap says nothing about the worker.
            late = now - checked > 2 * tick + self.config.heartbeat_s
            checked = now
            with self._lock:
                self._check_health(skip_silence=late)
                self._send_releases()
                self._pack_done()

    def _drain(self, conn, handle) -> None:  # noqa: ANN001
        """Handle every message waiting on ``conn`` (up to a bound, so that one chatty worker
        cannot starve the others): a heartbeat queued behind results still counts, and any
        message proves the worker process alive."""
        for _ in range(_MAX_DRAIN):
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                with self._lock:
                    if handle.conn is conn:
                        self._worker_down(handle, f"pipe closed ({_exit(handle)})")
                return
            with self._lock:
                if handle.conn is not conn:
                    return
                handle.seen(clock.monotonic())
                self._dispatch(handle, msg)
            try:
                if not _waiting(conn):
                    return
            except (EOFError, OSError, ValueError):
                return  # closed: the next wait() reports it

    def _dispatch(self, handle, msg: tuple) -> None:
        try:
            getattr(self, _HANDLERS[msg[0]])(handle, *msg[1:])
        except Exception:  # a bad message must not kill the pump: log it and go on
            log.exception("executor could not handle %r from %s", msg[0], handle.device.device_id)

    def _check_health(self, skip_silence: bool = False) -> None:
        now = clock.monotonic()
        loading = {p.device_id for p in self._loads.values()}
        relaxed = max(2 * self.config.heartbeat_s, self.config.load_silence_s)
        for handle in self._workers.values():
            if skip_silence:
                handle.forgive_silence(now)
            limit = relaxed if handle.device.device_id in loading else None
            verdict = handle.health(now, self.config.startup_grace_s, limit)
            if verdict is not None:
                self._worker_down(handle, verdict[1], verdict[0])

    def _worker_down(self, handle, reason: str, cause: str = "worker_down") -> None:
        """Kill, report everything it held as lost (items failed-retriable), restart.
        ``cause`` is the worker's (``worker_down`` or ``hang``): with ``hang``, the items of
        every batch it was running are ``hang``, and those of queued batches ``worker_down``."""
        if self._stopping.is_set():
            return
        if self.attached and not self._on_loop_thread():
            # the loop reads this worker's pipe: it alone may close and replace it
            self._loop.call_soon_threadsafe(self._down_on_loop, handle, handle.conn, reason, cause)
            return
        self._unwatch_conn(handle.conn)
        device_id = handle.device.device_id
        log.warning("worker %s down: %s", device_id, reason)
        # every batch running in a hung worker hung with it (joined batches share its loop);
        # the ones queued behind them were just lost
        hung = set(handle.running) if cause == "hang" else set()
        handle.kill()
        failed: list[str] = []
        for batch in list(handle.inflight.values()):
            why = "hang" if batch.batch_id in hung else "worker_down"
            results = self._failures(batch, device_id, f"worker {device_id} down: {reason}", why)
            failed.extend(r.idempotency_key for r in results)
            self._finish(batch, results)
        handle.inflight.clear()
        for batch_id, parked in list(self._parked.items()):
            if parked.device_id == device_id:
                del self._parked[batch_id]
                results = self._failures(parked.batch, device_id, f"worker {device_id} down")
                failed.extend(r.idempotency_key for r in results)
                self._finish(parked.batch, results)
        lost = self._forget_device(device_id, reason)
        self._emit(WorkerDown(device_id, reason, lost, tuple(failed)))
        handle.start(clock.monotonic())
        self._watch(handle)  # attached: the loop reads the new pipe

    def _forget_device(self, device_id: str, reason: str) -> tuple[str, ...]:
        lost = tuple(sorted(r for r, (d, _) in self._replicas.items() if d == device_id))
        for replica_id in lost:
            del self._replicas[replica_id]
            self._table.remove(replica_id)
        for load_id, pending in list(self._loads.items()):
            if pending.device_id == device_id:
                del self._loads[load_id]
                self._table.remove(pending.replica_id)
                pending.future.set_result(
                    LoadReport(pending.replica_id, device_id, False, f"worker down: {reason}")
                )
        for replica_id, (holder, future) in list(self._unloads.items()):
            if holder == device_id:
                del self._unloads[replica_id]
                future.set_result(0)
        for key in [k for k, d in self._output_at.items() if d == device_id]:
            del self._output_at[key]
        self._releases.pop(device_id, None)  # its outputs died with it
        for request_id, (holder, target) in list(self._requests.items()):
            if holder == device_id:
                if isinstance(target, concurrent.futures.Future):
                    del self._requests[request_id]
                    target.set_exception(KeyError(f"worker {device_id} down"))
                else:
                    self._on_exported(None, request_id, None, "holder down")
        return lost


def _waiting(conn) -> bool:  # noqa: ANN001
    """Whether ``conn`` has bytes to read now. ``Connection.poll(0)`` answers the same through
    a selector built per call, at about five times the cost, once per message read."""
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def _exit(handle) -> str:
    proc = handle.process
    if proc is None:
        return "no process"
    proc.join(timeout=0.5)
    return f"exit code {proc.exitcode}"
