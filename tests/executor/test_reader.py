"""The one reader of the worker pipes, fixed at start: started for an event loop, the loop
reads the pipes, events reach the listener on the loop's thread (the after-events hook once
they are out), and a worker killed mid-run is restarted with its new pipe read by the loop;
started without one, a reader thread of the executor's delivers them. Stopping from another
thread lets the loop go of the pipes first."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.protocol import (
    Batch,
    BatchItem,
    ExecutorError,
    GenParams,
    ItemCompleted,
    ModelRef,
    StepKey,
    WorkerDown,
    WorkerUp,
)

BERT = ModelRef("tiny-bert", "embed", "tiny", "bert")


def _executor(cache, **overrides) -> LocalExecutor:  # noqa: ANN001
    config = dict(heartbeat_s=0.4, cache_dir=str(cache), cpu_slots=1, use_cuda=False,
                  poll_queue=False)  # fmt: skip
    return LocalExecutor(ExecutorConfig(**{**config, **overrides}))


def _item(key: str, text: str) -> BatchItem:
    return BatchItem(StepKey(f"run-{key}", "embed"), key, {"text": text}, GenParams())


async def _until(events: list, predicate, timeout: float = 60.0) -> None:  # noqa: ANN001
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate(events):
        assert asyncio.get_running_loop().time() < deadline, f"timed out; saw {events!r}"
        await asyncio.sleep(0.01)


async def _load(ex, replica: str) -> None:  # noqa: ANN001
    report = await asyncio.wrap_future(ex.load(replica, BERT, "cpu:0"))
    assert report.ok, report.reason


def _done(seen: list) -> list:
    return [(e, t) for e, t in seen if isinstance(e, ItemCompleted)]


async def test_the_loop_reads_the_pipes_and_survives_a_killed_worker(model_cache) -> None:
    ex = _executor(model_cache)
    seen: list[tuple[object, int]] = []
    reads: list[int] = []  # events seen by then, each time the loop has read a pipe
    loop_thread = threading.get_ident()
    ex.start(lambda event: seen.append((event, threading.get_ident())),
             loop=asyncio.get_running_loop(), after_events=lambda: reads.append(len(seen)))  # fmt: skip
    try:
        assert await asyncio.to_thread(ex.wait_ready, 90)
        await _load(ex, "e1")
        ex.submit(Batch("b1", "e1", (_item("k1", "cats purr"),)))
        await _until(seen, lambda s: _done(s))
        done = _done(seen)
        assert done[0][0].result.ok and done[0][1] == loop_thread  # read and told on the loop
        assert reads[-1] == len(seen)  # told once the result's event was emitted
        assert {t for _, t in seen} == {loop_thread}  # heartbeats' WorkerUp too

        os.kill(ex.worker_pid("cpu:0"), signal.SIGKILL)
        await _until(seen, lambda s: any(isinstance(e, WorkerUp) and e.restarts for e, _ in s),
                     120)  # fmt: skip
        down = [(e, t) for e, t in seen if isinstance(e, WorkerDown)]
        assert len(down) == 1 and down[0][1] == loop_thread
        await _load(ex, "e2")  # the new worker's pipe is read too
        ex.submit(Batch("b2", "e2", (_item("k2", "dogs bark"),)))
        await _until(seen, lambda s: len(_done(s)) == 2)
        assert seen[-1][0].result.ok and seen[-1][1] == loop_thread
    finally:
        await asyncio.to_thread(ex.stop)


async def test_the_loop_watches_health_a_hung_batch_is_caught_there(model_cache) -> None:
    """Health is judged at the loop's own ticks: a batch past its deadline takes its worker
    down, reported on the loop's thread (and nothing else is found wrong meanwhile)."""
    ex = _executor(model_cache, hang_floor_s=1.5)
    seen: list[tuple[object, int]] = []
    loop_thread = threading.get_ident()
    ex.start(lambda event: seen.append((event, threading.get_ident())),
             loop=asyncio.get_running_loop())  # fmt: skip
    try:
        assert await asyncio.to_thread(ex.wait_ready, 90)
        silent = ModelRef("noop-silent", "noop", "tool", options={"tick": False})
        report = await asyncio.wrap_future(ex.load("h", silent, "cpu:0"))
        assert report.ok, report.reason
        item = BatchItem(StepKey("run-h", "h"), "h-1", {}, GenParams(busy_ms=60_000))
        ex.submit(Batch("hang", "h", (item,)))
        await _until(seen, lambda s: any(isinstance(e, WorkerDown) for e, _ in s), 30)
        (down,) = [(e, t) for e, t in seen if isinstance(e, WorkerDown)]
        assert "hung" in down[0].reason and down[0].failed_items == ("h-1",)
        assert down[1] == loop_thread
        assert [e.result.cause for e, _ in _done(seen)] == ["hang"]
    finally:
        await asyncio.to_thread(ex.stop)


async def test_stop_from_another_thread_lets_the_loop_go_of_the_pipes_first(model_cache) -> None:
    ex = _executor(model_cache)
    ex.start(loop=asyncio.get_running_loop())
    assert await asyncio.to_thread(ex.wait_ready, 90)
    reader = ex._workers._reader
    watched = list(reader._watched)
    assert watched  # the loop reads the worker's pipe
    await asyncio.to_thread(ex.stop)
    assert reader._watched == {} and reader._timer is None
    loop = asyncio.get_running_loop()
    assert all(not loop.remove_reader(fd) for fd in watched)  # nothing left registered


def test_without_a_loop_a_reader_thread_delivers_and_start_is_once_only(model_cache) -> None:
    ex = _executor(model_cache)
    threads: list[str] = []
    done = threading.Event()

    def listener(event: object) -> None:
        threads.append(threading.current_thread().name)
        if isinstance(event, ItemCompleted):
            done.set()

    ex.start(listener)
    try:
        assert ex.wait_ready(90)
        with pytest.raises(ExecutorError, match="already called"):
            ex.start()
        assert ex.load("e1", BERT, "cpu:0").result(timeout=60).ok
        ex.submit(Batch("b1", "e1", (_item("k1", "cats purr"),)))
        assert done.wait(30)
        assert set(threads) == {"executor-reader"}
    finally:
        ex.stop()
