"""Several batches running at once in one worker (batches joined a generate replica's decode
loop): the worker handle times each against its own deadline, the status lists all of them,
and when the worker hangs every one of them is reported ``hang`` (queued ones ``worker_down``).

White-box, no process: what the executor does with its worker's ``started``/``results``
messages and at its ticks (health), on a handle whose process is a stand-in, with the
executor's clock a ``ManualClock``.
"""

from __future__ import annotations

import pytest

from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.host.handle import WorkerHandle
from control.executor.protocol import (
    Batch,
    BatchItem,
    DeviceInfo,
    GenParams,
    ItemCompleted,
    ModelRef,
    StepKey,
    WorkerDown,
    wire,
)
from control.executor.worker.main import WorkerConfig
from tests.support.clock import ManualClock

HB = 0.5
FLOOR_S = 5.0


class _Process:
    """A worker process stand-in: alive until killed (or told it crashed)."""

    def __init__(self) -> None:
        self.alive, self.exitcode = True, None

    def is_alive(self) -> bool:
        return self.alive

    def kill(self) -> None:
        self.alive, self.exitcode = False, -9

    def join(self, timeout: float | None = None) -> None:
        pass


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start_s=100.0)


def _batch(batch_id: str, expected_ms: float | None, n: int = 1) -> Batch:
    items = tuple(
        BatchItem(StepKey("r", f"{batch_id}{i}"), f"{batch_id}-{i}", {"prompt": "x"}, GenParams())
        for i in range(n)
    )
    return Batch(batch_id, "gen", items, expected_ms=expected_ms)


class _Sent:
    """A handle's ``send`` stand-in: records every message, the pipe always takes it."""

    def __init__(self) -> None:
        self.msgs: list[tuple] = []

    def __call__(self, msg: tuple) -> bool:
        self.msgs.append(msg)
        return True


def _executor(*batches: Batch, clock: ManualClock) -> tuple[LocalExecutor, WorkerHandle, list]:
    """An executor (not started) with one up worker, a stand-in process whose sends are
    recorded in ``handle.send.msgs``, a loaded replica ``gen`` and ``batches`` submitted to
    it; returns it, the handle, and the list its restarts are recorded in."""
    ex = LocalExecutor(
        ExecutorConfig(heartbeat_s=HB, hang_floor_s=FLOOR_S, hang_multiple=2.0, use_cuda=False),
        clock=clock,
    )
    now = clock.monotonic()
    handle = WorkerHandle(DeviceInfo("cpu:9", "cpu", 9, 64), WorkerConfig(heartbeat_s=HB))
    handle.process, handle.up, handle.last_hb, handle.started_at = _Process(), True, now, now
    handle.send = _Sent()
    restarts: list[float] = []
    handle.start = restarts.append  # no real process: record the restart instead
    ex._workers.add(handle)
    ex.load("gen", ModelRef("gen", "generate", "tiny", "gpt2", expected_mib=1), "cpu:9")
    _says(ex, handle, wire.LOADED, "load-0", "gen", 1.0, 1)
    for batch in batches:
        ex.submit(batch)
    return ex, handle, restarts


def _says(ex: LocalExecutor, handle: WorkerHandle, *msg: object) -> None:
    """The worker sent ``msg`` (read from its pipe; a stand-in has none)."""
    assert ex._inbound.on_message(handle, handle.conn, msg)


def _watch_for(ex: LocalExecutor, clock: ManualClock, seconds: float, alive: bool) -> None:
    """Let ``seconds`` pass tick by tick, as the executor's reader would (the worker's
    messages keep coming when ``alive``), until the worker is restarted."""
    tick = ex._workers.tick_s
    handle = next(iter(ex._workers))
    for _ in range(round(seconds / tick) + 1):
        clock.advance(tick)
        if alive:
            handle.seen(clock.monotonic())
        ex._inbound.tick()
        if handle.process is None:  # taken down (and "restarted")
            return


def _events(ex: LocalExecutor) -> list:
    events = []
    while (event := ex.poll(0)) is not None:
        events.append(event)
    return events


def test_the_handle_times_each_running_batch_from_its_own_start():
    handle = WorkerHandle(DeviceInfo("cpu:0", "cpu", 0, 64), WorkerConfig(heartbeat_s=HB))
    handle.process, handle.up = _Process(), True
    handle.on_started("slow", 0.0, 120.0)
    handle.on_started("quick", 10.0, 5.0)  # joined later, due first
    handle.seen(14.9)
    assert handle.health(14.9, startup_grace_s=60) is None
    handle.seen(15.1)
    cause, reason = handle.health(15.1, startup_grace_s=60)
    assert cause == "hang" and "batch quick" in reason and "1 other running" in reason
    handle.on_finished("quick")
    assert handle.health(15.1, startup_grace_s=60) is None  # slow is within its own deadline
    handle.seen(119.9)
    assert handle.health(119.9, startup_grace_s=60) is None
    handle.seen(120.1)
    assert "batch slow" in handle.health(120.1, startup_grace_s=60)[1]


def test_the_status_lists_every_running_batch(clock):
    slow, quick, queued = _batch("slow", 60_000), _batch("quick", None), _batch("queued", None)
    ex, handle, _ = _executor(slow, quick, queued, clock=clock)
    _says(ex, handle, wire.STARTED, "slow")
    clock.advance(1.0)
    _says(ex, handle, wire.STARTED, "quick")  # joined slow's loop
    clock.advance(0.5)
    (status,) = ex.heartbeat()
    assert status.busy and status.running_batches == ("slow", "quick")
    assert status.running_count == 2 and status.running_batch == "slow"
    assert [r.running_for_s for r in status.running] == pytest.approx([1.5, 0.5])
    assert [r.deadline_s for r in status.running] == [120.0, FLOOR_S]
    _says(ex, handle, wire.RESULTS, "slow", [])  # the first one left the loop; the joiner runs on
    (status,) = ex.heartbeat()
    assert status.running_batches == ("quick",) and status.running[0].running_for_s == 0.5
    _says(ex, handle, wire.RESULTS, "quick", [])
    (status,) = ex.heartbeat()
    assert status.running_batches == () and not status.busy and status.running_batch is None


@pytest.mark.parametrize(
    ("how", "running_cause"),
    [("deadline", "hang"), ("silence", "hang"), ("crash", "worker_down")],
)
def test_every_batch_of_a_hung_loop_is_reported_hang(clock, how, running_cause):
    """Two batches joined in one loop, one more queued behind: when the worker hangs (a batch
    past its deadline, or no heartbeat), both running batches hung in that loop; the queued
    one was only lost. A crash is ``worker_down`` for all."""
    first, joiner, queued = _batch("first", 60_000, 2), _batch("joiner", None), _batch("q", None)
    ex, handle, restarts = _executor(first, joiner, queued, clock=clock)
    _says(ex, handle, wire.STARTED, "first")
    clock.advance(1.0)
    _says(ex, handle, wire.STARTED, "joiner")
    if how == "deadline":  # the joiner (5 s floor) passes its deadline; heartbeats go on
        _watch_for(ex, clock, FLOOR_S + 0.1, alive=True)
    elif how == "silence":  # no message for longer than its missed heartbeats allow
        _watch_for(ex, clock, ex._workers.silence_s + 0.1, alive=False)
    else:
        handle.process.alive, handle.process.exitcode = False, -11
        _watch_for(ex, clock, 0.0, alive=True)
    events = _events(ex)
    causes = {e.result.idempotency_key: e.result.cause for e in events
              if isinstance(e, ItemCompleted)}  # fmt: skip
    assert causes == {
        "first-0": running_cause,
        "first-1": running_cause,
        "joiner-0": running_cause,
        "q-0": "worker_down",
    }
    (down,) = [e for e in events if isinstance(e, WorkerDown)]
    assert sorted(down.failed_items) == sorted(causes)
    assert restarts == [clock.monotonic()] and not handle.inflight and not handle.running
    assert ex._dispatch.in_flight() == 0  # every key completed once


def test_a_batch_sent_to_an_idle_worker_is_timed_from_its_send_and_not_announced(clock):
    """Nothing in flight: the worker starts the batch as it arrives, so the executor arms its
    deadline at the send and asks for no ``started``; a batch sent behind it is announced
    (it starts, or joins a loop, later) and timed from that announcement."""
    ex, handle, _ = _executor(clock=clock)
    sent = handle.send
    first, behind = _batch("first", 60_000), _batch("behind", None)
    ex.submit(first)
    batches = lambda: [m for m in sent.msgs if m[0] == wire.BATCH]  # noqa: E731
    assert [(m[0], m[1].batch_id, m[3]) for m in batches()] == [("batch", "first", False)]
    assert handle.running == {"first": (clock.monotonic(), 120.0)}
    clock.advance(1.0)
    ex.submit(behind)
    assert [(m[1].batch_id, m[3]) for m in batches()] == [("first", False), ("behind", True)]
    assert "behind" not in handle.running  # queued behind first: timed once it starts
    clock.advance(0.5)
    _says(ex, handle, wire.STARTED, "behind")
    assert handle.running["behind"] == (clock.monotonic(), FLOOR_S)
    _says(ex, handle, wire.RESULTS, "first", [])
    assert list(handle.running) == ["behind"]
