"""The worker processes of a local executor, one per device: started, judged, replaced, stopped.

:class:`Workers` owns the :class:`~control.executor.host.handle.WorkerHandle` of every device
and the one pipe reader given at :meth:`Workers.start` (a worker replaced gets its new pipe
read by the same reader). Health is judged at each of the executor's ticks
(:meth:`Workers.verdicts`): a worker may be silent for ``missed_heartbeats`` intervals, and
past that is hung only with evidence (see :mod:`~control.executor.host.handle`); a tick that
itself came late (a starved process on a loaded machine, or a loop held up) was not
listening, so silence measured across that gap says nothing about the workers and is forgiven
once.

No worker outlives this process: :meth:`Workers.stop_all` stops them in order, and when this
process dies without stopping them (SIGKILL), each worker's pipe to it closes and the worker ends
(its serve loop and its heartbeat thread both take a closed pipe as the order to stop). The pipe
is the parent-death signal, rather than ``PR_SET_PDEATHSIG``, because the kernel would send that
when the *thread* that started the worker ends, and a worker is restarted from the pipe
reader's tick (a thread of its own, or the event loop's).
``tests/faults/test_supervision.py`` kills a host to check it.

Not thread-safe: the executor calls it under its lock (except :meth:`close_reader`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Protocol

from control.clock import Clock
from control.executor.host.config import ExecutorConfig
from control.executor.host.handle import WorkerHandle
from control.executor.protocol import DeviceInfo, ExecutorError, WorkerStatus, WorkerUp
from control.executor.worker.main import WorkerConfig

log = logging.getLogger(__name__)


class PipeReader(Protocol):
    """The one reader of the worker pipes (see :mod:`control.executor.host.reader`)."""

    def watch(self, handle: WorkerHandle) -> None: ...

    def unwatch(self, handle: WorkerHandle) -> None: ...

    def start(self) -> None: ...

    def close(self) -> None: ...


class Workers:
    def __init__(self, config: ExecutorConfig, clock: Clock) -> None:
        self.config = config
        self._now = clock.monotonic
        self._handles: dict[str, WorkerHandle] = {}
        self._reader: PipeReader | None = None
        self._checked = self._now()  # the last health check (see verdicts)
        self.tick_s = config.heartbeat_s / 5  # how often the executor ticks
        #: how long an up worker may be silent before its silence is judged
        self.silence_s = config.missed_heartbeats * config.heartbeat_s

    def start(self, devices: Sequence[DeviceInfo], reader: PipeReader) -> None:
        """Spawn one worker per device and have ``reader`` read their pipes from now on."""
        c = self.config
        wc = WorkerConfig(c.heartbeat_s, c.cache_dir, c.torch_threads)
        now = self._now()
        for device in devices:
            handle = WorkerHandle(device, wc)
            handle.start(now)
            self.add(handle)
        self._reader, self._checked = reader, now
        for handle in self._handles.values():
            reader.watch(handle)
        reader.start()

    def add(self, handle: WorkerHandle) -> None:
        """Take charge of a started handle (``start`` does, for each device)."""
        self._handles[handle.device.device_id] = handle

    def close_reader(self) -> None:
        """Stop reading every pipe (before the workers stop; without the executor's lock:
        a reader on a loop may need that loop to let go)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def stop_all(self) -> None:
        """Ask every worker to stop and make sure it did."""
        for handle in self._handles.values():
            handle.stop()

    def __getitem__(self, device_id: str) -> WorkerHandle:
        try:
            return self._handles[device_id]
        except KeyError:
            raise ExecutorError(
                f"device_id {device_id!r} is not one of {sorted(self._handles)}"
            ) from None

    def __iter__(self) -> Iterator[WorkerHandle]:
        return iter(self._handles.values())

    def send(self, device_id: str, msg: tuple) -> bool:
        """Queue ``msg`` for a device's worker without blocking (False: its pipe is gone; the
        reader then sees it closed and its work is reported lost)."""
        return self._handles[device_id].send(msg)

    def all_up(self) -> bool:
        return all(h.up for h in self._handles.values())

    def statuses(self) -> list[WorkerStatus]:
        now = self._now()
        return [h.status(now) for h in self._handles.values()]

    def on_heartbeat(
        self, handle: WorkerHandle, pid: int, busy: bool, replicas: tuple, used_mib: int
    ) -> WorkerUp | None:
        """Record a heartbeat; a first one (the worker is up) is returned as ``WorkerUp``."""
        if handle.on_heartbeat(self._now(), pid, busy, replicas, used_mib):
            return WorkerUp(handle.device.device_id, pid, handle.restarts)
        return None

    def verdicts(self, loading: set[str]) -> list[tuple[WorkerHandle, str, str]]:
        """(handle, cause, reason) of every worker found dead or hung now. Workers of devices
        in ``loading`` may be silent for longer (``load_silence_s``)."""
        now = self._now()
        late = now - self._checked > 2 * self.tick_s + self.config.heartbeat_s
        self._checked = now
        relaxed = max(self.silence_s, self.config.load_silence_s)
        found = []
        for handle in self._handles.values():
            if late:
                handle.forgive_silence(now)
            limit = relaxed if handle.device.device_id in loading else self.silence_s
            verdict = handle.health(now, self.config.startup_grace_s, limit)
            if verdict is not None:
                found.append((handle, *verdict))
        return found

    def take_down(self, handle: WorkerHandle) -> None:
        """Stop reading its pipe, then kill its process (the handle stays, to be restarted)."""
        if self._reader is not None:
            self._reader.unwatch(handle)
        handle.kill()

    def bring_up(self, handle: WorkerHandle) -> None:
        """Start a fresh process for a handle taken down, and read its new pipe."""
        handle.start(self._now())
        if self._reader is not None:
            self._reader.watch(handle)
