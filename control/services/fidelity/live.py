"""The live side of the fidelity check: the real runtime and executor on this machine.

One session (``run_live``) starts a ``LiveRuntime`` over the real multi-process executor (one
CPU worker slot pinned to ``worker_core``; this process, which runs the driver, pinned to the
other cores; both raised in priority where allowed, see :mod:`.priority`) and, in order:

1. warms the path up (model, tokenizer, IPC) with a few requests that are not measured;
2. **profiles in the serving worker** (:mod:`.session`): a block of ``profile_repeats`` sweeps
   of the (batch size, tokens) grid gives a table and the runtime's overheads. A worker's
   device time differs from a profile taken in another process (on this shared machine by
   20-60%), which is why the table comes from the worker that serves;
3. replays the slice open-loop at its (time-scaled) trace arrivals, ``slice_repeats`` times
   (rounds), each round followed by another profile block. Each request's end-to-end latency,
   batch size and its batch's device time are kept, and when it was really submitted (a
   loaded event loop wakes a sender late: the twin replays the arrivals as sent).

Each round's twin table pools the samples of the two blocks that bracket it (per point their
median, see ``_Session.table_between``). The machine's speed
moves by 10-20% over seconds even with the worker's core to itself (the other core's load
shares caches, memory and the host's core), so a table measured next to each round describes
that round better than one table for the whole session, and figures pooled over several rounds
weigh a few unlucky seconds less than one round does.

The profile's repeats also measure how much device times scatter around each point's median
(``sigma_milli``): the twin scatters its batches the same way (``SimExecutorConfig``), since
queueing delay grows with the variance of service times, not only with their median.

Nothing here is fitted to the slice: the twin gets the tables and overheads of the blocks.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace

from control import clock
from control.core.latency import LatencyModel, TableLatencyModel
from control.services.fidelity.config import DEVICE_ID, MODEL_KEY, FidelityConfig
from control.services.fidelity.priority import Priority, schedstat
from control.services.fidelity.records import (
    BatchSeen,
    LiveOutcome,
    Overheads,
    RequestSeen,
    Round,
)
from control.services.fidelity.session import BatchLog, _Session
from control.services.fidelity.world import (
    device_info,
    fidelity_scenario,
    model_ref,
    pinned,
    rate_for_load,
    slice_arrivals,
)
from sim.driver import Arrival
from sim.scenario import LatencyTables, Scenario

__all__ = [
    "BatchLog",
    "BatchSeen",
    "LiveOutcome",
    "Overheads",
    "RequestSeen",
    "Round",
    "SwappableLatency",
    "_Session",
    "run_live",
]


class SwappableLatency:
    """The live core's latency model: a provisional table until the in-worker profile exists,
    then the latest block's table. Swapped only while nothing runs, so no decision sees two."""

    def __init__(self, inner: LatencyModel) -> None:
        self.inner = inner

    def forward_us(self, model_key: str, device_type: str, batch_size: int, tokens: int) -> int:
        return self.inner.forward_us(model_key, device_type, batch_size, tokens)

    def decode_us(self, model_key: str, device_type: str, batch_size: int, out: int) -> int:
        return self.inner.decode_us(model_key, device_type, batch_size, out)

    def load_us(self, model_key: str, device_type: str) -> int | None:
        return self.inner.load_us(model_key, device_type)


def _runtime(cfg: FidelityConfig, scenario: Scenario, latency: LatencyModel, log: BatchLog):  # noqa: ANN202
    from control.executor.host import ExecutorConfig, LocalExecutor
    from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig

    executor = LocalExecutor(
        ExecutorConfig(cache_dir=cfg.cache_dir, use_cuda=False, poll_queue=False, heartbeat_s=2.0),
        [device_info(cfg)],
    )
    return LiveRuntime(
        scenario.blueprint(cfg.seed), latency, executor, {MODEL_KEY: model_ref(cfg)},
        (InitialReplica(MODEL_KEY, DEVICE_ID),), RuntimeConfig(stream_tokens=False), metrics=log,
    )  # fmt: skip


async def _round(session: _Session, slice_: list[Arrival], k: int) -> tuple[list, dict]:
    """Replay the slice once (request ids ``<id>~k``): (arrivals as submitted, seen)."""
    reqs = [Arrival(a.at, replace(a.request, request_id=f"{a.request.request_id}~{k}"))
            for a in slice_]  # fmt: skip
    t0 = clock.monotonic() + 0.2
    done = await asyncio.gather(*(session.one(a.request, t0 + a.at) for a in reqs))
    # the twin replays the arrivals as submitted: a loaded event loop wakes a sender late, and
    # the live core batched what really arrived together
    sent = sorted((Arrival(session.submitted[a.request.request_id] - t0, a.request) for a in reqs),
                  key=lambda a: a.at)  # fmt: skip
    return sent, {rid: s for rid, s in done if s is not None}


async def _live(cfg: FidelityConfig) -> LiveOutcome:
    base = fidelity_scenario(cfg, ())
    latency, log = SwappableLatency(TableLatencyModel()), BatchLog()
    # the driver's threads first: the executor's threads and the worker it starts inherit it
    prio = Priority(cfg.nice) if cfg.nice is not None else None
    raised = prio is not None and prio.raise_(os.getpid())
    rt = _runtime(cfg, base, latency, log)
    try:
        await rt.start()
        worker = rt.executor.worker_pid(DEVICE_ID)
        if raised and worker is not None:
            prio.raise_(worker)  # type: ignore[union-attr]  # inherited; this is a safeguard
        marks = {"start": schedstat(worker) if worker else None}
        session = _Session(rt, log, cfg, slice_arrivals(base, cfg)[0].request)
        await session.warm()
        profiles = [await session.profile("p0")]
        marks["profile0"] = schedstat(worker) if worker else None
        latency.inner = LatencyTables(profiles[0]).model()
        rate = cfg.rate_factor or rate_for_load(cfg, profiles[0])
        slice_ = slice_arrivals(fidelity_scenario(cfg, profiles[0], rate), cfg)
        played = []
        for k in range(cfg.slice_repeats):
            played.append(await _round(session, slice_, k))
            marks[f"slice{k + 1}"] = schedstat(worker) if worker else None
            profiles.append(await session.profile(f"p{k + 1}", warm_sweep=False))
            marks[f"profile{k + 1}"] = schedstat(worker) if worker else None
            latency.inner = LatencyTables(profiles[-1]).model()  # the worker is idle now
    finally:
        await rt.stop()
        if prio is not None:
            prio.restore()
    rounds = tuple(Round(session.table_between(k, k + 1), sent, seen)
                   for k, (sent, seen) in enumerate(played))  # fmt: skip
    return LiveOutcome(tuple(profiles), rounds, session.overheads(), session.sigma_milli(), rate,
                       cfg.nice if raised else None, _phases(marks))  # fmt: skip


def _phases(marks: dict[str, tuple[float, float] | None]) -> dict[str, list[float]]:
    """Per phase, the worker's [run, wait] ms between consecutive marks (where both exist)."""
    out, names = {}, list(marks)
    for a, b in zip(names, names[1:], strict=False):
        x, y = marks[a], marks[b]
        if x is not None and y is not None:
            out[b] = [round(y[0] - x[0], 1), round(y[1] - x[1], 1)]
    return out


def run_live(cfg: FidelityConfig) -> LiveOutcome:
    """One live session (see the module docstring); the driver runs beside the worker's core."""
    others = set(range(os.cpu_count() or 1)) - {cfg.worker_core}
    with pinned(others):
        return asyncio.run(_live(cfg))
