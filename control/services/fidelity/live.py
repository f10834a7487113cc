"""The live side of the fidelity check: the real runtime and executor on this machine.

One session (``run_live``) starts a ``LiveRuntime`` over the real multi-process executor (one
CPU worker slot pinned to ``worker_core``; this process, which runs the driver, pinned to the
other cores) and, in order:

1. warms the path up (model, tokenizer, IPC) with a few requests that are not measured;
2. **profiles in the serving worker**: for each (batch size, tokens) point it submits that many
   requests of that length at one instant, so the core forms exactly that batch, and keeps the
   worker's own device time of the batch (median over ``profile_repeats`` sweeps of the grid;
   each batch is followed by an idle pause, ``profile_idle_ratio`` times its length, so the
   worker runs at the duty cycle it serves the slice at: on a core shared with other processes
   a worker that keeps sleeping and waking computes slower than one kept busy, by 10-30% here,
   and the slice's batches then ran slower than the table). The same requests measure the
   runtime's overheads: per batch, the driver's dispatch-to-completion time minus
   the device time (IPC and hops, on the replica's busy path), and per run, the end-to-end time
   minus the batch's dispatch-to-completion time minus the batching delay the core applied
   (submit hop and result delivery, off the busy path). A worker's device time differs from
   a profile taken in another process (on this shared machine by 20-60%), which is why the
   table comes from the worker that serves;
3. replays the slice open-loop at its (time-scaled) trace arrivals; each request's end-to-end
   latency, batch size and its batch's device time are kept, and when it was really submitted
   (a loaded event loop wakes a sender late: the twin replays the arrivals as sent);
4. profiles again, so the twin can use the mean of two tables that bracket the slice.

The profile's repeats also measure how much device times scatter around each point's median
(``sigma_milli``): the twin scatters its batches the same way (``SimExecutorConfig``), since
queueing delay grows with the variance of service times, not only with their median.

Nothing here is fitted to the slice: the twin gets the tables and overheads of steps 2 and 4.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from prometheus_client import CollectorRegistry

from control.core.latency import LatencyModel, LatencyRow, TableLatencyModel
from control.core.types import Request
from control.runtime import clock
from control.runtime.metrics import RuntimeMetrics
from control.services.fidelity.config import DEVICE_ID, MODEL_KEY, FidelityConfig
from control.services.fidelity.world import (
    device_info,
    fidelity_scenario,
    model_ref,
    pinned,
    rate_for_load,
    slice_arrivals,
    text_of,
)
from sim.driver import Arrival
from sim.scenario import LatencyTables, Scenario


@dataclass(frozen=True)
class BatchSeen:
    size: int
    device_ms: float  # the worker's measured compute time
    wall_ms: float  # the driver's dispatch to completion


@dataclass(frozen=True)
class RequestSeen:
    """One request as either side saw it."""

    e2e_s: float
    batch_size: int
    device_ms: float  # device time of the batch it ran in


@dataclass(frozen=True)
class Overheads:
    """The runtime's own time, measured on the profile requests (medians, microseconds)."""

    busy_us: int  # per batch, on the replica's busy path
    run_us: int  # per run, off the busy path


class BatchLog(RuntimeMetrics):
    """Runtime metrics that also keep every finished batch, in completion order."""

    def __init__(self) -> None:
        super().__init__(CollectorRegistry())
        self.batches: list[BatchSeen] = []

    def batch_done(
        self, model: str, device: str, size: int, device_ms: float, wall_s: float
    ) -> None:
        super().batch_done(model, device, size, device_ms, wall_s)
        self.batches.append(BatchSeen(size, device_ms, wall_s * 1000.0))


class SwappableLatency:
    """The live core's latency model: a provisional table until the in-worker profile exists,
    then that table. Swapped only while nothing runs, so no decision sees two tables."""

    def __init__(self, inner: LatencyModel) -> None:
        self.inner = inner

    def forward_us(self, model_key: str, device_type: str, batch_size: int, tokens: int) -> int:
        return self.inner.forward_us(model_key, device_type, batch_size, tokens)

    def decode_us(self, model_key: str, device_type: str, batch_size: int, out: int) -> int:
        return self.inner.decode_us(model_key, device_type, batch_size, out)

    def load_us(self, model_key: str, device_type: str) -> int | None:
        return self.inner.load_us(model_key, device_type)


@dataclass(frozen=True)
class LiveOutcome:
    before: tuple[LatencyRow, ...]  # in-worker table measured before the slice
    after: tuple[LatencyRow, ...]  # and after it
    overheads: Overheads
    sigma_milli: int  # scatter of the worker's device times around the table (see SimExecutor)
    rate_factor: float
    requests: list[Arrival]  # the slice as submitted (offsets from the slice's start)
    seen: dict[str, RequestSeen]  # succeeded requests of the slice


class _Session:
    """The requests of one live session: warm-up, profile bursts and the slice; keeps the
    overhead and scatter samples the profile measured."""

    def __init__(self, rt, log: BatchLog, cfg: FidelityConfig, template: Request) -> None:  # noqa: ANN001
        self.rt, self.log, self.cfg, self.template = rt, log, cfg, template
        self.busy: list[float] = []
        self.run: list[float] = []
        self.scatter: list[float] = []  # log(sample / its point's median), every profile batch
        self.submitted: dict[str, float] = {}  # request id -> monotonic time it was submitted

    async def one(self, request: Request, at: float | None = None):  # noqa: ANN201
        """Submit at monotonic time ``at`` (now if None): (id, RequestSeen or None)."""
        from control.runtime.types import RunRequest

        if at is not None:
            await asyncio.sleep(max(0.0, at - clock.monotonic()))
        start = self.submitted[request.request_id] = clock.monotonic()
        handle = self.rt.submit_run(RunRequest(request, {"text": text_of(request.prompt_tokens)}))
        result = await handle.result()
        e2e = clock.monotonic() - start
        if not result.ok or not result.usage:
            return request.request_id, None
        u = result.usage[0]
        return request.request_id, RequestSeen(e2e, u.batch_size, u.device_us * u.batch_size / 1e3)

    async def burst(self, size: int, tokens: int, tag: str) -> tuple[list, list[BatchSeen]]:
        """``size`` requests of ``tokens`` at one instant; their results and the batches."""
        first = len(self.log.batches)
        reqs = [replace(self.template, request_id=f"{tag}-{i}", prompt_tokens=tokens)
                for i in range(size)]  # fmt: skip
        done = await asyncio.gather(*(self.one(r) for r in reqs))
        return [s for _, s in done], self.log.batches[first:]

    async def warm(self) -> None:
        for i in range(self.cfg.calibration_requests):
            tokens = self.cfg.profile_tokens[i % len(self.cfg.profile_tokens)]
            await self.burst(1, tokens, f"warm-{i}")

    async def profile(self, phase: str, warm_sweep: bool = True) -> tuple[LatencyRow, ...]:
        """The in-worker table (see the module docstring); records overhead samples.

        Each repeat sweeps the whole grid once (after one untimed sweep that warms every
        shape, unless ``warm_sweep`` is False because an earlier profile did), so load that other processes put on the machine over time spreads evenly over
        the points instead of skewing the ones measured last. Every batch a burst produced is a
        sample of its own (size, tokens) point; the row is the median of a point's samples."""
        cfg = self.cfg
        samples: dict[tuple[int, int], list[float]] = {}
        first = 0 if warm_sweep else 1
        for rep in range(first, cfg.profile_repeats + 1):
            for tokens in cfg.profile_tokens:
                for size in cfg.profile_batch_sizes:
                    seen, batches = await self.burst(size, tokens, f"{phase}-{tokens}-{size}-{rep}")
                    await self._idle(batches)
                    if rep == 0:
                        continue
                    for b in batches:
                        samples.setdefault((b.size, tokens), []).append(b.device_ms)
                    if len(batches) == 1 and batches[0].size == size:
                        self._overheads(batches[0], seen, size)
        rows = []
        for (size, tokens), ms in sorted(samples.items()):
            middle = statistics.median(ms)
            self.scatter.extend(math.log(x / middle) for x in ms if x > 0 and middle > 0)
            rows.append(LatencyRow(MODEL_KEY, "cpu", size, tokens, round(middle * 1000)))
        return tuple(rows)

    async def _idle(self, batches: Sequence[BatchSeen]) -> None:
        """Leave the worker idle for ``profile_idle_ratio`` times the batch's time: it then
        runs at the duty cycle it serves the slice at (it sleeps between batches there too, and
        a core shared with other processes does not give a waking worker the speed of a busy
        one)."""
        busy_s = sum(b.wall_ms for b in batches) / 1000
        if self.cfg.profile_idle_ratio > 0 and busy_s > 0:
            await asyncio.sleep(busy_s * self.cfg.profile_idle_ratio)

    def _overheads(self, b: BatchSeen, seen: Sequence[RequestSeen | None], size: int) -> None:
        # a batch short of the max size waits out the batching delay from its first arrival
        delay_ms = self.cfg.max_queue_delay_s * 1000 if size < self.cfg.max_batch_size else 0.0
        self.busy.append(b.wall_ms - b.device_ms)
        self.run.extend(s.e2e_s * 1000 - b.wall_ms - delay_ms for s in seen if s is not None)

    def sigma_milli(self) -> int:
        """Spread of device times around the table: RMS of log(sample / median), x1000."""
        if not self.scatter:
            return 0
        return round(1000 * math.sqrt(sum(x * x for x in self.scatter) / len(self.scatter)))

    def overheads(self) -> Overheads:
        def med(xs: list[float]) -> int:
            return max(0, round(statistics.median(xs) * 1000)) if xs else 0

        return Overheads(med(self.busy), med(self.run))


def _runtime(cfg: FidelityConfig, scenario: Scenario, latency: LatencyModel, log: BatchLog):  # noqa: ANN202
    from control.executor.local import ExecutorConfig, LocalExecutor
    from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig

    executor = LocalExecutor(
        ExecutorConfig(cache_dir=cfg.cache_dir, use_cuda=False, poll_queue=False, heartbeat_s=2.0),
        [device_info(cfg)],
    )
    return LiveRuntime(
        scenario.blueprint(cfg.seed), latency, executor, {MODEL_KEY: model_ref(cfg)},
        (InitialReplica(MODEL_KEY, DEVICE_ID),), RuntimeConfig(stream_tokens=False), metrics=log,
    )  # fmt: skip


async def _live(cfg: FidelityConfig) -> LiveOutcome:
    base = fidelity_scenario(cfg, ())
    latency, log = SwappableLatency(TableLatencyModel()), BatchLog()
    rt = _runtime(cfg, base, latency, log)
    await rt.start()
    try:
        session = _Session(rt, log, cfg, slice_arrivals(base, cfg)[0].request)
        await session.warm()
        before = await session.profile("before")
        latency.inner = LatencyTables(before).model()
        rate = cfg.rate_factor or rate_for_load(cfg, before)
        reqs = slice_arrivals(fidelity_scenario(cfg, before, rate), cfg)
        t0 = clock.monotonic() + 0.2
        done = await asyncio.gather(*(session.one(a.request, t0 + a.at) for a in reqs))
        after = await session.profile("after", warm_sweep=False)
    finally:
        await rt.stop()
    seen = {rid: s for rid, s in done if s is not None}
    # the twin replays the arrivals as submitted: a loaded event loop wakes a sender late, and
    # the live core batched what really arrived together
    sent = sorted((Arrival(session.submitted[a.request.request_id] - t0, a.request) for a in reqs),
                  key=lambda a: a.at)  # fmt: skip
    return LiveOutcome(before, after, session.overheads(), session.sigma_milli(), rate, sent, seen)


def run_live(cfg: FidelityConfig) -> LiveOutcome:
    """One live session (see the module docstring); the driver runs beside the worker's core."""
    others = set(range(os.cpu_count() or 1)) - {cfg.worker_core}
    with pinned(others):
        return asyncio.run(_live(cfg))
