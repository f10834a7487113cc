"""An executor attached to an event loop: the loop reads the worker pipes, events reach the
listeners on the loop's thread, a worker killed mid-run is restarted and its new pipe read,
and detaching hands reading back to the pump thread."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from control.executor.base import (
    Batch,
    BatchItem,
    GenParams,
    ItemCompleted,
    ModelRef,
    StepKey,
    WorkerDown,
    WorkerUp,
)
from tests.executor.conftest import make_executor

BERT = ModelRef("tiny-bert", "embed", "tiny", "bert")


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


async def test_the_loop_reads_the_pipes_and_survives_a_killed_worker(model_cache) -> None:
    ex = make_executor(model_cache, cpu_slots=1, poll_queue=False)
    seen: list[tuple[object, int]] = []
    ex.add_listener(lambda event: seen.append((event, threading.get_ident())))
    loop_thread = threading.get_ident()
    reads: list[int] = []  # events seen by then, each time the loop has read a pipe
    try:
        await ex.attach(after_read=lambda: reads.append(len(seen)))
        assert ex.attached
        await _load(ex, "e1")
        ex.submit(Batch("b1", "e1", (_item("k1", "cats purr"),)))
        await _until(seen, lambda s: any(isinstance(e, ItemCompleted) for e, _ in s))
        done = [(e, t) for e, t in seen if isinstance(e, ItemCompleted)]
        assert done[0][0].result.ok and done[0][1] == loop_thread  # read and told on the loop
        assert reads[-1] == len(seen)  # told once the result's event was emitted

        os.kill(ex.worker_pid("cpu:0"), signal.SIGKILL)
        await _until(seen, lambda s: any(isinstance(e, WorkerUp) for e, _ in s), 120)
        down = [(e, t) for e, t in seen if isinstance(e, WorkerDown)]
        assert len(down) == 1 and down[0][1] == loop_thread
        await _load(ex, "e2")  # the new worker's pipe is read too
        ex.submit(Batch("b2", "e2", (_item("k2", "dogs bark"),)))
        await _until(seen, lambda s: sum(isinstance(e, ItemCompleted) for e, _ in s) == 2)
        assert seen[-1][0].result.ok and seen[-1][1] == loop_thread

        ex.detach()
        assert not ex.attached
        ex.submit(Batch("b3", "e2", (_item("k3", "birds sing"),)))
        await _until(seen, lambda s: sum(isinstance(e, ItemCompleted) for e, _ in s) == 3)
        assert seen[-1][1] != loop_thread  # the pump thread reads again
    finally:
        await asyncio.to_thread(ex.stop)


async def test_stop_from_another_thread_lets_the_loop_go_of_the_pipes_first(model_cache) -> None:
    ex = make_executor(model_cache, cpu_slots=1, poll_queue=False)
    await ex.attach()
    watched = list(ex._watched)
    assert watched  # the loop reads the worker's pipe
    await asyncio.to_thread(ex.stop)
    assert not ex.attached and ex._watched == {}
    loop = asyncio.get_running_loop()
    assert all(not loop.remove_reader(fd) for fd in watched)  # nothing left registered


async def test_attach_before_start_is_refused() -> None:
    from control.executor.base import ExecutorError
    from control.executor.local import ExecutorConfig, LocalExecutor

    with pytest.raises(ExecutorError, match="started executor"):
        await LocalExecutor(ExecutorConfig(use_cuda=False, cpu_slots=1)).attach()
