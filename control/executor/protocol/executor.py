"""The executor Protocol: everything the live runtime (and the services, commands and benches
above it) may ask of a set of devices. A backend is one implementation of it: the
:class:`~control.executor.host.local.LocalExecutor` drives one worker process per local device;
a multi-node backend (one actor per device) implements the same methods, so nothing above this
Protocol changes with the backend.

Threads. The caller chooses at :meth:`Executor.start` where events are delivered: given an
event loop, every event (and the ``after_events`` hook) is delivered on that loop's thread and
the backend does its own reading there (the live runtime's case: no thread hop on the way from
a device's result to the driver); without one, on a thread of the backend's own (synchronous
users: tests that ``poll``, scripts). The choice holds until :meth:`Executor.stop`. The other
methods may be called from the delivery thread or any other; none blocks on a device.

Outcomes are values: a model that cannot load resolves to a :class:`LoadReport` with
``ok=False``; a step that cannot run completes as a failed :class:`ItemResult` with a structured
``cause``. Misuse (an unknown device, a replica loaded twice) raises :class:`ExecutorError`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Protocol

from control.executor.protocol.reports import (
    EventListener,
    ExecutorEvent,
    LoadReport,
    WorkerStatus,
)
from control.executor.protocol.work import Batch, DeviceInfo, ModelRef


class Executor(Protocol):
    """A set of devices running model steps (see the module docstring for threads)."""

    def start(
        self,
        on_event: EventListener | None = None,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        after_events: Callable[[], None] | None = None,
    ) -> None:
        """Bring the devices up (returns at once; see :meth:`wait_ready`). ``on_event`` gets
        every event from now on, in order, on the delivery thread: ``loop``'s when given (call
        ``start`` on that loop), else one of the backend's own. ``after_events`` is called on
        the same thread each time the events that arrived together have all been delivered,
        with no lock of the executor held: the consumer may act on them at once (the live
        driver takes its turn then). Both must not block."""

    def wait_ready(self, timeout_s: float = 120.0) -> bool:
        """Block until every device can take work; False when ``timeout_s`` passed first.
        Never call it on the delivery loop (it waits for what that loop delivers)."""

    def stop(self) -> None:
        """End every device; pending load futures resolve failed. Any thread; may block for
        seconds. No event is delivered once it returns."""

    def devices(self) -> list[DeviceInfo]:
        """The devices, known from ``start`` on (with those that joined since). A backend
        over a cluster reports a device that comes later (a node joined) as ``DeviceJoined``
        once it can take work, and a node that leaves as ``WorkerDown`` of its devices; the
        local executor's devices are fixed at construction: it never emits ``DeviceJoined``."""

    def load(
        self, replica_id: str, model_ref: ModelRef, device_id: str, *, group: tuple[str, ...] = ()
    ) -> concurrent.futures.Future[LoadReport]:
        """Load a replica on a device (making room by evicting idle replicas, each reported as
        ``ReplicaEvicted``). Resolves to a report, ``ok=False`` with a reason when it does not
        fit or fails. Raises ExecutorError for an unknown device or a replica id in use.

        ``group``: every device of a replica that spans several (tensor parallel degree k: the
        core's group, ``device_id`` among them; empty or one device: just ``device_id``). The
        replica is loaded only when it fits on EVERY device of the group, holds its memory on
        each (each device's status lists it and counts its MiB) until it is unloaded, evicted
        or one of them is lost, and runs on ``device_id``; else the report says which device
        (or, on a cluster, which node) could not take it."""

    def unload(self, replica_id: str) -> concurrent.futures.Future[int]:
        """Unload a replica; resolves to the MiB freed. Raises ExecutorError when not loaded."""

    def submit(self, batch: Batch) -> None:
        """Run a batch on its replica. Never blocks, never raises for expected outcomes: every
        item completes exactly once per submission as ``ItemCompleted`` (ok; failed for good;
        or failed-retriable, e.g. when its device went down). A key already completed is
        answered from the idempotency store (``replayed=True``) and never runs again; a key
        in flight is not run twice; retriable failures are not stored, so a retry runs."""

    def cancel(self, idempotency_keys: Iterable[str]) -> None:
        """Best effort: items not started yet complete as failed with ``cause="cancelled"``
        (not stored: a later submit of the key runs); running ones finish normally; unknown or
        finished keys are ignored."""

    def fetch_output(self, run_id: str, node_id: str) -> concurrent.futures.Future[dict]:
        """The full output (tensors as lists) of a completed step, from the device holding
        it; fails with KeyError when none holds it (released, or lost with its device)."""

    def returned_output(self, run_id: str, node_id: str) -> dict | None:
        """The output of a completed step that came back with its result (``return_output``),
        or None (then ask :meth:`fetch_output`). Never waits."""

    def release_run(self, run_id: str) -> None:
        """Forget every output of a finished run (a fetch fails from now on) and the stored
        results of its keys (a later submit of one runs again: nothing submits a finished run's
        keys); the devices holding the outputs drop them soon after."""

    def heartbeat(self) -> list[WorkerStatus]:
        """The latest status of every device's worker."""

    def worker_pid(self, device_id: str) -> int | None:
        """The OS process serving a device when it runs on this machine, else None."""

    def events(self) -> AsyncIterator[ExecutorEvent]:
        """Every event from now on, in order, on the caller's event loop."""

    def poll(self, timeout: float) -> ExecutorEvent | None:
        """The next event for a synchronous caller (tests, scripts), or None after
        ``timeout`` seconds. Events are queued for it from ``start`` on where the backend keeps
        that queue (LocalExecutor: ``ExecutorConfig.poll_queue``); else ExecutorError."""


def replica_devices(device_id: str, group: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The devices a load holds: ``device_id`` (where the replica runs) first, then the rest of
    its ``group`` in order, each once (see :meth:`Executor.load`)."""
    return (device_id, *dict.fromkeys(d for d in group if d != device_id))
