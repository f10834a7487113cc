"""The requests of one live session of the fidelity check: warm-up, in-worker profile blocks
and the slice's rounds; and what the profile measures beside the table (the runtime's overheads
and the scatter of device times).

Profile (``_Session.profile``): for each (batch size, tokens) point, that many requests of that
length are submitted at one instant, so the core forms exactly that batch, and the worker's own
device time of the batch is kept (median over ``profile_repeats`` sweeps of the grid; each batch
is followed by an idle pause, ``profile_idle_ratio`` times its length, so the worker runs at the
duty cycle it serves the slice at: on a core shared with other processes a worker that keeps
sleeping and waking computes slower than one kept busy). The same requests measure the
runtime's overheads: per batch, the driver's dispatch-to-completion time minus the device time
(IPC and hops, on the replica's busy path), and per run, the end-to-end time minus the batch's
dispatch-to-completion time minus the batching delay the core applied (submit hop and result
delivery, off the busy path).
"""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Sequence
from dataclasses import replace

from prometheus_client import CollectorRegistry

from control import clock
from control.core.latency import LatencyRow
from control.core.types import Request
from control.runtime.metrics import RuntimeMetrics
from control.services.fidelity.config import MODEL_KEY, FidelityConfig
from control.services.fidelity.records import BatchSeen, Overheads, RequestSeen
from control.services.fidelity.world import text_of


class BatchLog(RuntimeMetrics):
    """Runtime metrics that also keep every finished batch, in completion order."""

    def __init__(self) -> None:
        super().__init__(CollectorRegistry())
        self.batches: list[BatchSeen] = []

    def batch_done(
        self, model: str, device: str, size: int, device_ms: float, wall_s: float,
        moved_bytes: int = 0,
    ) -> None:  # fmt: skip
        super().batch_done(model, device, size, device_ms, wall_s, moved_bytes)
        self.batches.append(BatchSeen(size, device_ms, wall_s * 1000.0))


class _Session:
    """The requests of one live session; keeps the overhead and scatter samples the profile
    measured."""

    def __init__(self, rt, log: BatchLog, cfg: FidelityConfig, template: Request) -> None:  # noqa: ANN001
        self.rt, self.log, self.cfg, self.template = rt, log, cfg, template
        self.busy: list[float] = []
        self.run: list[float] = []
        #: per profile block: (batch size, tokens) -> the device times (ms) of its samples
        self.blocks: list[dict[tuple[int, int], list[float]]] = []
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
        """One profile block: the in-worker table (see the module docstring); records overhead
        and scatter samples.

        Each repeat sweeps the whole grid once (after one untimed sweep that warms every shape,
        unless ``warm_sweep`` is False because an earlier block did), so load that other
        processes put on the machine over time spreads evenly over the points instead of
        skewing the ones measured last. Every batch a burst produced is a sample of its own
        (size, tokens) point; the row is the median of a point's samples."""
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
        self.blocks.append(samples)
        return tuple(
            LatencyRow(MODEL_KEY, "cpu", size, tokens, round(statistics.median(ms) * 1000))
            for (size, tokens), ms in sorted(samples.items())
        )

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

    def table_between(self, first: int, last: int) -> tuple[LatencyRow, ...]:
        """The twin's table for the round measured between blocks ``first`` and ``last``:
        per (batch size, tokens) point, the median of every sample of those blocks pooled.

        Pooled, not the mean of each block's median: device times on a shared core are skewed
        to the slow side (a batch the host interrupts runs long, none runs much short), so a
        mean follows the slow samples while the twin scatters its batches around the table's
        value as a median (``SimExecutorConfig.service_sigma_milli``). With one sample per
        block the two are the same (the median of two samples is their mean)."""
        blocks = self.blocks[first : last + 1]
        points: dict[tuple[int, int], list[float]] = {}
        for block in blocks:
            for point, ms in block.items():
                points.setdefault(point, []).extend(ms)
        return tuple(
            LatencyRow(MODEL_KEY, "cpu", size, tokens, round(statistics.median(ms) * 1000))
            for (size, tokens), ms in sorted(points.items())
        )

    def sigma_milli(self) -> int:
        """Spread of device times around the table the twin uses, x1000: the standard deviation
        of log(sample / centre). A round's table pools the samples of the two blocks around it
        (:meth:`table_between`), so each point's samples of two consecutive blocks scatter
        around their pooled median (drift between the blocks included: the round between them
        sees it too); with a single block, around its own medians. A centre estimated from the
        samples sits closer to them than the true one (two samples are each exactly half their
        gap away), so each group of ``n`` samples counts ``n - 1`` degrees of freedom, as the
        sample variance does."""
        pairs = list(zip(self.blocks, self.blocks[1:], strict=False))
        squares = freedom = 0.0
        for around in pairs or [(b,) for b in self.blocks]:
            for point in set.intersection(*(set(b) for b in around)):
                centre = statistics.median([x for b in around for x in b[point]])
                logs = [math.log(x / centre) for b in around for x in b[point] if x > 0 < centre]
                squares += sum(x * x for x in logs)
                freedom += max(0, len(logs) - 1)
        return round(1000 * math.sqrt(squares / freedom)) if freedom > 0 and squares else 0

    def overheads(self) -> Overheads:
        def med(xs: list[float]) -> int:
            return max(0, round(statistics.median(xs) * 1000)) if xs else 0

        return Overheads(med(self.busy), med(self.run))
