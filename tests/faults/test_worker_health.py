"""Healthy workers are not killed (issue 22): a real executor, reading its worker's pipe on
uvloop as ``legato api`` does (uvicorn picks uvloop when installed), with a tool replica.

In the issue's fault run ten worker restarts had no injected cause: "pipe closed (exit code
None)" (uvloop leaves the pipe non-blocking: a message arriving in parts was taken for a closed
pipe, and a send the pipe could not take at once broke the sender half-way through a frame) and
"no heartbeat for 1.01-1.08 s (limit 1.00 s): hung" (two missed beats, judged before the
reader had read the beats waiting in the pipe). A worker that is really stopped is still found
hung, with the evidence that its process used no CPU."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable

from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.protocol import (
    Batch,
    BatchItem,
    GenParams,
    ItemCompleted,
    ModelRef,
    StepKey,
    WorkerDown,
)

NOOP = ModelRef("noop", "noop", "tool")
HB = 0.5


def _run(main: Callable[[], object]) -> None:
    """Run ``main()`` on uvloop (the loop the API serves on), else on asyncio's own."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        factory = None
    else:
        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        runner.run(main())  # type: ignore[arg-type]


class _Stack:
    """One started executor with one CPU worker and a ``noop`` replica; ``seen`` its events."""

    def __init__(self, cache: str) -> None:
        config = ExecutorConfig(heartbeat_s=HB, cache_dir=cache, cpu_slots=1, use_cuda=False,
                                poll_queue=False, keep_host_off_worker_cores=False)  # fmt: skip
        self.ex = LocalExecutor(config)
        self.seen: list[object] = []

    async def __aenter__(self) -> _Stack:
        self.ex.start(self.seen.append, loop=asyncio.get_running_loop())
        assert await asyncio.to_thread(self.ex.wait_ready, 90), "the worker did not start"
        report = await asyncio.wrap_future(self.ex.load("noop", NOOP, "cpu:0"))
        assert report.ok, report.reason
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.ex.stop)

    def downs(self) -> list[WorkerDown]:
        return [e for e in self.seen if isinstance(e, WorkerDown)]

    async def run(self, key: str, inputs: dict, timeout_s: float = 20.0) -> ItemCompleted:
        item = BatchItem(StepKey(f"run-{key}", "n"), key, inputs, GenParams(), True)
        self.ex.submit(Batch(f"b-{key}", "noop", (item,)))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            done = [e for e in self.seen if isinstance(e, ItemCompleted)
                    and e.result.idempotency_key == key]  # fmt: skip
            if done:
                return done[0]
            assert loop.time() < deadline, f"{key} not done in {timeout_s}s; downs {self.downs()}"
            await asyncio.sleep(0.02)


def test_large_messages_each_way_on_uvloop_arrive_whole(tmp_path):
    """8 MB to the worker and back: neither side's message is cut, nothing is taken for a
    closed pipe, and the pipe is still in step for the next batch."""
    blob = [f"{i:08d}" + "x" * 1000 for i in range(8000)]  # distinct strings: 8 MB pickled

    async def main() -> None:
        async with _Stack(str(tmp_path)) as s:
            done = await s.run("big", {"blob": blob})
            assert done.result.ok, done.result.error
            assert done.result.output["blob"] == blob
            small = await s.run("small", {"blob": ["a"]})
            assert small.result.ok and small.result.output == {"blob": ["a"]}
            assert s.downs() == []

    _run(main)


def test_a_worker_stopped_for_longer_than_two_beats_is_not_killed(tmp_path):
    """Three missed beats (a starved worker): tolerated; it serves on afterwards."""

    async def main() -> None:
        async with _Stack(str(tmp_path)) as s:
            pid = s.ex.worker_pid("cpu:0")
            os.kill(pid, signal.SIGSTOP)
            try:
                await asyncio.sleep(1.5)
            finally:
                os.kill(pid, signal.SIGCONT)
            await asyncio.sleep(1.0)
            assert s.downs() == []
            assert (await s.run("after", {"x": 1})).result.ok
            assert s.ex.worker_pid("cpu:0") == pid and s.downs() == []

    _run(main)


def test_a_loop_held_up_again_and_again_does_not_kill_its_worker(tmp_path):
    """The loop blocked for 0.65 s at a time (just short of a late tick, which is forgiven):
    on uvloop its timer ran before its reads, and the beats waiting unread in the pipe counted
    as silence. They are read before health is judged."""

    async def main() -> None:
        async with _Stack(str(tmp_path)) as s:
            for _ in range(8):
                time.sleep(0.65)  # blocks the loop: its reader and its ticks wait
                await asyncio.sleep(0.03)
            await asyncio.sleep(0.5)
            assert s.downs() == []
            assert (await s.run("after", {"x": 1})).result.ok

    _run(main)


def test_a_worker_stopped_for_good_is_found_hung_on_evidence(tmp_path):
    """Past its missed beats, silent and using no CPU: hung, taken down, and replaced."""

    async def main() -> None:
        async with _Stack(str(tmp_path)) as s:
            pid = s.ex.worker_pid("cpu:0")
            loop = asyncio.get_running_loop()
            stopped_at = loop.time()
            os.kill(pid, signal.SIGSTOP)
            limit = s.ex.config.missed_heartbeats * HB
            while not s.downs():
                assert loop.time() - stopped_at < limit + 5, "never found hung"
                await asyncio.sleep(0.05)
            took = loop.time() - stopped_at
            (down,) = s.downs()
            assert "hung" in down.reason and "no CPU" in down.reason, down.reason
            assert took > limit - HB  # it was given its missed beats
            assert s.ex.worker_pid("cpu:0") != pid  # a fresh worker started in its place

    _run(main)
