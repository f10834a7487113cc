"""One worker process as the host sees it: start, health, status, kill.

A :class:`WorkerHandle` is owned by :class:`~control.executor.host.workers.Workers` and touched
only under the executor's lock. Besides its process and pipe it keeps the batches sent to it
(``inflight``) and those it runs now (``running``), each timed against its own deadline. Health
is judged from three facts:

* the process is alive (a crash is seen at the executor's next tick, or at once as a closed
  pipe);
* its last heartbeat (or any message, or bytes of one still arriving) is younger than its
  silence limit, ``missed_heartbeats`` intervals (a worker still starting gets
  ``startup_grace_s`` to send its first one, because spawning and importing torch takes
  seconds). Heartbeats come from a thread of their own, so they prove the process lives even
  while one long forward pass holds the main thread. Silence alone is not proof of a hang (a
  starved worker on a busy machine beats late): past the limit a worker is hung only if its
  process used no CPU since its silence began (read from ``/proc``; where that cannot be read,
  silence decides), and in any case past :data:`SILENCE_CAP` times the limit;
* every batch it runs (announced by ``started``, or timed from its send when it went to an
  idle worker) is younger than that batch's own deadline, a
  generous multiple of its expected time with a floor (:func:`batch_deadline_s`): a batch
  still running past it is hung, whatever the heartbeats say.

A worker runs several batches at once when batches of a generate replica join its running
decode loop (continuous batching): the handle keeps every one of them (:attr:`running`), each
timed from its own start (its join) against its own deadline.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
from dataclasses import dataclass, field
from typing import Any

from control.executor.host.config import DEFAULT_MISSED_HEARTBEATS
from control.executor.host.sender import PipeSender
from control.executor.protocol import (
    Batch,
    DeviceInfo,
    ItemResult,
    RunningBatch,
    WorkerStatus,
    wire,
)
from control.executor.worker.main import WorkerConfig, worker_main

log = logging.getLogger(__name__)

_CTX = mp.get_context("spawn")

#: silence past this many times its limit is a hang even while the process uses CPU (its
#: heartbeat thread cannot run: the interpreter is wedged)
SILENCE_CAP = 4.0


def batch_deadline_s(expected_ms: float | None, multiple: float, floor_s: float) -> float:
    """Seconds a batch may run before it counts as hung: ``multiple`` x its expected time, and
    never less than ``floor_s`` (predictions are rough; a busy shared core runs slower)."""
    expected_s = (expected_ms or 0.0) / 1000.0
    return max(floor_s, multiple * expected_s)


class ExpectedTimes:
    """Each replica's device time per item, smoothed over its batches that ran: the expected
    time of a batch that states none (``Batch.expected_ms``), and so its hang deadline. Pure;
    shared by both executors."""

    def __init__(self) -> None:
        self._item_ms: dict[str, float] = {}  # replica -> smoothed device ms per item

    def deadline_s(self, batch: Batch, multiple: float, floor_s: float) -> float:
        """``batch``'s hang deadline (:func:`batch_deadline_s` of its expected time)."""
        expected = batch.expected_ms
        if expected is None and batch.replica_id in self._item_ms:
            expected = self._item_ms[batch.replica_id] * len(batch.items)
        return batch_deadline_s(expected, multiple, floor_s)

    def record(self, replica_id: str, results: list[ItemResult]) -> None:
        """A batch of ``replica_id`` reported ``results``: its ok items update the estimate."""
        ran = [r for r in results if r.ok]
        if ran:
            per_item = ran[0].device_ms / max(1, ran[0].batch_size)
            old = self._item_ms.get(replica_id, per_item)
            self._item_ms[replica_id] = 0.8 * old + 0.2 * per_item


@dataclass
class WorkerHandle:
    device: DeviceInfo
    config: WorkerConfig
    process: Any = None
    conn: Any = None
    sender: PipeSender | None = None  # writes to ``conn`` off the caller's thread
    pid: int | None = None
    up: bool = False  # True once its first heartbeat arrived
    started_at: float = 0.0
    last_hb: float = 0.0
    restarts: int = -1  # the first start makes it 0
    busy: bool = False
    replicas: tuple[str, ...] = ()
    used_mib: int = 0
    inflight: dict[str, Batch] = field(default_factory=dict)
    #: the batches it runs now, in start order: batch id -> (started at, deadline seconds)
    running: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: (CPU ticks its process had used, when read) since its silence began; None while it talks
    cpu_mark: tuple[int, float] | None = None

    def start(self, now: float) -> None:
        """Spawn a fresh worker process for this device (the old one must be gone)."""
        parent, child = _CTX.Pipe(duplex=True)
        proc = _CTX.Process(
            target=worker_main,
            args=(self.device, child, self.config),
            name=f"legato-worker-{self.device.device_id}",
            daemon=True,
        )
        proc.start()
        child.close()
        self.process, self.conn, self.pid = proc, parent, proc.pid
        self.sender = PipeSender(parent, self.device.device_id)
        self.up, self.started_at, self.last_hb = False, now, now
        self.restarts += 1
        self.busy, self.replicas, self.used_mib = False, (), 0
        self.inflight, self.running = {}, {}

    def on_heartbeat(self, now: float, pid: int, busy: bool, replicas, used_mib: int) -> bool:
        """Record a heartbeat; returns True when it is the first one (the worker is up)."""
        first = not self.up
        self.up, self.last_hb, self.pid = True, now, pid
        self.cpu_mark = None
        self.busy, self.replicas, self.used_mib = busy, tuple(replicas), used_mib
        return first

    def seen(self, now: float) -> None:
        """Any message from an up worker proves its process alive (heartbeats can queue
        behind results in the pipe)."""
        if self.up:
            self.last_hb = max(self.last_hb, now)
            self.cpu_mark = None

    def forgive_silence(self, now: float) -> None:
        """The watcher was not listening (it ran late): restart the silence count now, but
        never for a worker still starting (its grace period is counted from its start)."""
        if self.up:
            self.last_hb = max(self.last_hb, now - self.config.heartbeat_s)

    def on_started(self, batch_id: str, now: float, deadline_s: float) -> None:
        """The worker began ``batch_id`` (alone, or joining a running loop): it must finish
        within ``deadline_s`` of ``now``, whatever else runs with it."""
        self.running[batch_id] = (now, deadline_s)

    def on_finished(self, batch_id: str) -> None:
        """``batch_id`` reported (or is gone): it is no longer timed. Unknown ids are ignored."""
        self.running.pop(batch_id, None)

    def overdue(self, now: float) -> tuple[str, float, float] | None:
        """The running batch past its deadline that was due first, as (batch id, seconds run,
        deadline seconds); None while every running batch is within its own deadline."""
        late = [
            (since + limit, batch_id, now - since, limit)
            for batch_id, (since, limit) in self.running.items()
            if now - since > limit
        ]
        return min(late)[1:] if late else None

    def health(
        self, now: float, startup_grace_s: float, silence_limit_s: float | None = None
    ) -> tuple[str, str] | None:
        """None when healthy, else (cause, reason): cause ``worker_down`` or ``hang``.
        ``silence_limit_s``: how long it may be silent (default ``missed_heartbeats`` of the
        default config); silence past it is a hang only with evidence (module docstring)."""
        if self.process is None:
            return None
        if not self.process.is_alive():
            return "worker_down", f"process exited with code {self.process.exitcode}"
        if not self.up:
            if now - self.started_at > startup_grace_s:
                return "hang", f"no first heartbeat within {startup_grace_s:.0f}s of starting"
            return None
        limit = silence_limit_s
        if limit is None:
            limit = DEFAULT_MISSED_HEARTBEATS * self.config.heartbeat_s
        silence = self._silence(now, now - self.last_hb, limit)
        if silence is not None:
            return "hang", silence
        late = self.overdue(now)
        if late is not None:
            batch_id, ran, deadline = late
            others = len(self.running) - 1
            company = f" (with {others} other running batch(es) in its loop)" if others else ""
            return "hang", (
                f"batch {batch_id} has run {ran:.2f}s, past its {deadline:.2f}s deadline{company}: "
                "hung"
            )
        return None

    def _silence(self, now: float, silent: float, limit: float) -> str | None:
        """Why its silence of ``silent`` seconds makes it hung, or None (module docstring).
        The CPU its process has used is noted once the silence passes 1.5 intervals."""
        if silent > 1.5 * self.config.heartbeat_s and self.cpu_mark is None:
            ticks = process_cpu_ticks(self.pid)
            self.cpu_mark = None if ticks is None else (ticks, now)
        if silent <= limit:
            return None
        head = f"no heartbeat for {silent:.2f}s"
        if silent > SILENCE_CAP * limit:
            return f"{head} ({SILENCE_CAP:g} times the limit of {limit:.2f}s): hung"
        if self.cpu_mark is None:  # its CPU cannot be read here: silence decides
            return f"{head} (the limit is {limit:.2f}s): hung"
        if self._working(now):
            return None
        return f"{head} (the limit is {limit:.2f}s) and its process used no CPU meanwhile: hung"

    def _working(self, now: float) -> bool:
        """Whether its process used CPU since the silence began (or the last such proof, at
        least one heartbeat interval ago): the evidence a silent worker is alive."""
        mark = self.cpu_mark
        if mark is None:
            return False
        ticks, at = mark
        if now - at < self.config.heartbeat_s:
            return True  # proven alive less than an interval ago
        used = process_cpu_ticks(self.pid)
        if used is None or used <= ticks:
            return False
        self.cpu_mark = (used, now)
        return True

    def kill(self) -> None:
        """End the process (hung or dead) and close the pipe; safe to call twice."""
        if self.sender is not None:
            self.sender.close()
        if self.process is not None and self.process.is_alive():
            self.process.kill()
        if self.process is not None:
            self.process.join(timeout=5)
        if self.conn is not None:
            self.conn.close()
        self.process, self.conn, self.up, self.running = None, None, False, {}
        self.sender = None

    def exit_status(self) -> str:
        """How its process ended, for a log line (waits up to 0.5 s for it to end)."""
        if self.process is None:
            return "no process"
        self.process.join(timeout=0.5)
        return f"exit code {self.process.exitcode}"

    def send(self, msg: tuple) -> bool:
        """Queue ``msg`` for the worker without blocking; False when there is no live pipe."""
        return self.sender is not None and self.sender.send(msg)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the worker to stop, then make sure it did."""
        if self.sender is not None:  # after everything queued before it
            self.sender.send((wire.STOP,))
            self.sender.close(flush_timeout_s=timeout_s)
        if self.process is not None:
            self.process.join(timeout=timeout_s)
            code = self.process.exitcode
            if code:  # asked to stop, it should end cleanly: say so when it did not
                log.warning(
                    "worker %s ended with exit code %s after stop", self.device.device_id, code
                )
        self.kill()

    def status(self, now: float) -> WorkerStatus:
        alive = self.process is not None and self.process.is_alive()
        return WorkerStatus(
            device_id=self.device.device_id,
            pid=self.pid,
            alive=alive and self.up,
            last_heartbeat_age_s=max(0.0, now - self.last_hb),
            restarts=max(0, self.restarts),
            busy=bool(self.running),  # timed from its send or its "started" to its results
            replicas=self.replicas,
            used_mib=self.used_mib,
            running=tuple(
                RunningBatch(batch_id, max(0.0, now - since), limit)
                for batch_id, (since, limit) in self.running.items()
            ),
        )


def process_cpu_ticks(pid: int | None) -> int | None:
    """CPU time (user + system, in clock ticks) used so far by every thread of process
    ``pid``, from ``/proc``; None where it cannot be read (no such process, not Linux)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    except (OSError, ValueError, IndexError):
        return None
