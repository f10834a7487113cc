"""The simulated executor: waits out predicted latencies and reports what the real one would.

It never decides anything. For a ``Dispatch`` it predicts how long the batch takes on the first
device of the replica (forward pass over the longest prompt, minus cached prefix tokens when the
prefix-cache model is on, plus decode as ``fixed + per_seq x batch`` per generated token, plus
moving inputs held elsewhere, priced as the core prices them: :mod:`sim.transfers`, plus
loading the LoRA adapters the core found the replica lacking) and builds one :class:`~control.executor.protocol.ItemResult`
per item, the very record the live executor emits; :func:`to_batch_result` turns those into the
core's ``BatchResult`` exactly as a driver does. Loads take the measured load time or the
model's stated one. Router steps pick a branch label from seeded per-node weights. Where the
profile measured how much device times scatter (``service_sigma_milli``), each batch's time is
scattered the same way, seeded per batch: queueing grows with the variance of service times, so
a twin that waits out only medians under-predicts waiting on a noisy device.

A model with ``continuous_batching`` runs through ``join`` instead of ``run``: its batches share
their replica's decode loop (:mod:`sim.continuous`), so a batch that joins moves the completions
of the batches already there; scatter, prefix cache and transfers apply per batch as above.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from control.core.actions import Dispatch, LoadModel
from control.core.latency import LatencyModel
from control.core.routing.transfer import TransferCosts
from control.core.types import BLOCK_TOKENS, BatchResult, DeviceSpec, ModelSpec, StepResult
from control.core.values import record, value
from control.executor.protocol import ItemResult, StepKey
from sim.continuous import Joiner
from sim.executor_models import PrefixCache, route_label, service_factor
from sim.lanes import Joined, Lanes
from sim.transfers import batch_move_us


@dataclass(frozen=True)
class SimExecutorConfig:
    tool_us: int = field(default=1_000, metadata={"help": "host time of a tool step"})
    prefix_cache: bool = field(
        default=True,
        metadata={"help": "model a per-replica KV prefix cache from trace block hashes"},
    )
    prefix_cache_blocks: int = field(
        default=4096, metadata={"help": "prefix blocks one replica's KV cache holds (LRU)"}
    )
    transfers: bool = field(
        default=True, metadata={"help": "charge moving inputs held on another device"}
    )
    transfer_costs: TransferCosts | None = field(
        default=None,
        metadata={
            "help": "how moves are priced; None: the core's own (CoreConfig.transfer, which "
            "the runner passes), so the twin charges what the router predicts"
        },
    )
    dispatch_overhead_us: int = field(
        default=0,
        metadata={
            "help": "measured serving-stack time per model batch beyond the device time "
            "(driver hops, IPC to the worker, result decoding); 0 for published tables"
        },
    )
    service_sigma_milli: int = field(
        default=0,
        metadata={
            "help": "spread of measured device times around the table: the standard deviation "
            "of log(measured / median) in thousandths, from the profile's repeats. Each batch "
            "then takes its predicted time times a log-normal factor of median 1 (seeded per "
            "batch); 0: every batch takes exactly the table's time"
        },
    )

    def __post_init__(self) -> None:
        for name in ("tool_us", "dispatch_overhead_us", "service_sigma_milli"):
            if getattr(self, name) < 0:
                raise ValueError(f"SimExecutorConfig.{name}={getattr(self, name)}: must be >= 0")


@value
class Completion:
    """What a dispatched batch produces, and when (offsets from its dispatch, microseconds)."""

    result: BatchResult
    records: tuple[ItemResult, ...]
    duration_us: int
    first_token_us: int | None  # prefill done: first output token of generate items
    #: ran in its replica's continuous decode loop: its time overlaps the other batches there
    joined: bool = False


@record
class _Work:
    """A model batch's device work, before a replica schedules it (microseconds)."""

    dev: DeviceSpec
    hits: list[int]  # prefix blocks hit, per item
    move: int  # transfers and dispatch overhead, before the device starts
    prefill: int  # scatter applied
    decode: int  # alone on the replica, scatter applied
    out: int  # tokens its longest output generates
    factor: float  # its scatter (1.0 without)


try:  # mypy is a build dependency only (``make native``); without it the marker does nothing
    from mypy_extensions import mypyc_attr
except ImportError:  # pragma: no cover

    def mypyc_attr(*_args: object, **_flags: object):  # type: ignore[no-redef,misc]
        return lambda cls: cls


@mypyc_attr(allow_interpreted_subclasses=True)  # the fidelity replay subclasses it
class SimExecutor:
    """Predicts completions of dispatched batches. Keeps the prefix-cache contents and the
    decode loops of continuous replicas."""

    def __init__(
        self,
        latency: LatencyModel,
        devices: Mapping[str, DeviceSpec],
        models: Mapping[str, ModelSpec],
        config: SimExecutorConfig | None = None,
        routes: Mapping[str, Mapping[str, int]] | None = None,
        seed: int = 0,
    ) -> None:
        self.latency = latency
        self.devices = dict(devices)
        self.models = dict(models)
        self.config = config or SimExecutorConfig()
        self.costs = self.config.transfer_costs or TransferCosts()
        self.routes = routes or {}
        self.seed = seed
        self._caches: dict[str, PrefixCache] = {}
        #: continuous replicas with batches in flight (``device_down`` drops a failed device's)
        self.lanes = Lanes()

    def load_us(self, action: LoadModel) -> int:
        """Measured load time on the target's device type, else the model's stated one."""
        acc = self.devices[action.device_ids[0]].accelerator
        measured = self.latency.load_us(action.model_key, acc)
        if measured is not None:
            return measured
        return int(self.models[action.model_key].load_time_s * 1e6)

    def run(self, d: Dispatch) -> Completion:
        """Predict one batch alone on its replica: duration, first-token offset, records."""
        if d.replica_id is None:
            return self._tool(d)
        w = self._work(d)
        total = w.move + w.prefill + w.decode
        first = w.move + w.prefill if w.out else None
        return self._completion(d, w, total, first, len(d.items))

    def join(self, d: Dispatch, now: float) -> tuple[Completion, list[tuple[str, float]]]:
        """Continuous batching: ``d`` (dispatched at ``now``) joins its replica's decode loop
        (:mod:`sim.continuous`). Returns its completion as predicted now, and (batch id, end on
        the clock) for it and for every batch there whose end it moves. A batch alone on an
        idle replica gets exactly what ``run`` predicts when its sequences all generate as many
        tokens; ``deliver`` gives a batch's final completion when it ends."""
        w = self._work(d)
        key, acc, lat = d.model_key or "", w.dev.accelerator, self.latency
        outputs = tuple(i.max_output_tokens for i in d.items)
        chunk = self.models[key].prefill_chunk_tokens if key in self.models else 0
        tokens = self._prompt_tokens(d, w) if chunk else 0
        joined = self.lanes.join(
            d.replica_id or "", d.device_ids, now, lambda n, k: lat.decode_us(key, acc, n, k),
            Joiner(d.batch_id, w.move, w.prefill, outputs, w.factor, tokens), w,
            prefill=(lambda x: lat.forward_us(key, acc, 1, x)) if chunk else None,
            chunk_tokens=chunk,
        )  # fmt: skip
        return self._joined(d, joined[0]), [(x.batch_id, x.end_s) for x in joined]

    def _prompt_tokens(self, d: Dispatch, w: _Work) -> int:
        """Prompt tokens a chunked engine prefills for ``d``: each item's, less its prefix-cache
        hit (when the cache is modelled); no padding, chunks pack the prompts end to end."""
        cut = w.hits if self.config.prefix_cache else [0] * len(w.hits)
        return sum(
            max(0, i.input_tokens - h * BLOCK_TOKENS) for i, h in zip(d.items, cut, strict=True)
        )

    def deliver(self, d: Dispatch) -> Completion:
        """A joined batch ends: its final completion (``device_ms`` from dispatch to end,
        ``first_token_ms`` its own prefill's end, ``batch_size`` the sequences decoding together
        right after it joined, its own included); its replica's loop forgets it."""
        return self._joined(d, self.lanes.release(d.replica_id or "", d.batch_id))

    def _joined(self, d: Dispatch, x: Joined) -> Completion:
        w, tm, t0 = x.payload, x.timing, x.dispatch_us
        first = tm.first_token_us - t0 if w.out else None  # type: ignore[attr-defined]
        return self._completion(d, w, tm.end_us - t0, first, tm.joined_with, True)  # type: ignore[arg-type]

    def _work(self, d: Dispatch) -> _Work:
        dev = self.devices[d.device_ids[0]]
        cfg = self.config
        hits = self._hits(d)
        cut = hits if cfg.prefix_cache else [0] * len(hits)  # off: no discount, as the replay
        longest = max(
            max(0, i.input_tokens - h * BLOCK_TOKENS) for i, h in zip(d.items, cut, strict=True)
        )
        key, acc, n = d.model_key or "", dev.accelerator, len(d.items)
        prefill = self.latency.forward_us(key, acc, n, longest)
        out = max(i.max_output_tokens for i in d.items)
        decode = self.latency.decode_us(key, acc, n, out) if out else 0
        spread = 1.0
        if cfg.service_sigma_milli:
            spread = service_factor(d.batch_id, self.seed, cfg.service_sigma_milli)
            prefill, decode = round(prefill * spread), round(decode * spread)
        move = batch_move_us(self.costs, self.devices, d, dev) if cfg.transfers else 0
        move += cfg.dispatch_overhead_us  # before the device starts, as the worker sees it
        move += d.adapter_load_us  # LoRA adapters the core found the replica lacking load first
        return _Work(dev, hits, move, prefill, decode, out, spread)

    def _completion(
        self, d: Dispatch, w: _Work, total: int, first: int | None, n: int, joined: bool = False
    ) -> Completion:
        records = tuple(
            ItemResult(
                step=StepKey(it.request_id, it.node_id, it.attempt),
                idempotency_key=it.idempotency_key,
                replica_id=d.replica_id,  # type: ignore[arg-type]
                device_id=w.dev.device_id,
                ok=True,
                input_tokens=it.input_tokens,
                output_tokens=it.max_output_tokens,
                device_ms=total / 1000,
                first_token_ms=first / 1000 if it.max_output_tokens and first is not None else None,
                prefix_hit_tokens=h * BLOCK_TOKENS,
                batch_size=n,
            )  # fmt: skip
            for it, h in zip(d.items, w.hits, strict=True)
        )
        return Completion(to_batch_result(d, records, total), records, total, first, joined)

    def _hits(self, d: Dispatch) -> list[int]:
        if not self.config.prefix_cache:
            return [i.predicted_hit_blocks for i in d.items]
        cache = self._caches.get(d.replica_id or "")
        if cache is None:
            cache = self._caches[d.replica_id or ""] = PrefixCache(self.config.prefix_cache_blocks)
        return [cache.hit_then_insert(i.prefix_blocks) if i.prefix_blocks else 0 for i in d.items]

    def _tool(self, d: Dispatch) -> Completion:
        # device-held inputs are fetched to the host first, as the live executor does
        move = batch_move_us(self.costs, self.devices, d, None) if self.config.transfers else 0
        us = self.config.tool_us + move
        records = tuple(
            ItemResult(
                step=StepKey(it.request_id, it.node_id, it.attempt),
                idempotency_key=it.idempotency_key,
                replica_id="host",
                device_id="host",
                ok=True,
                input_tokens=it.input_tokens,
                device_ms=us / 1000,
                batch_size=len(d.items),
                label=route_label(it, self.routes, self.seed) if d.tool == "router" else None,
            )  # fmt: skip
            for it in d.items
        )
        return Completion(to_batch_result(d, records, us), records, us, None)

    def forget_replica(self, replica_id: str) -> None:
        """A replica is gone (device down, evicted): its KV cache goes with it."""
        self._caches.pop(replica_id, None)


def to_batch_result(d: Dispatch, records: tuple[ItemResult, ...], device_us: int) -> BatchResult:
    """The core's view of executor records: one StepResult per item, in dispatch order."""
    items = tuple(
        StepResult(
            key=it.key,
            ok=r.ok,
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            prefix_hit_blocks=r.prefix_hit_tokens // BLOCK_TOKENS,
            first_token=r.first_token_ms is not None,
            route_label=r.label,
            error=r.error,
        )  # fmt: skip
        for it, r in zip(d.items, records, strict=True)
    )
    return BatchResult(d.batch_id, device_us, items)
