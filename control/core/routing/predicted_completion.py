"""Lowest predicted completion, with session affinity under a balance guard.

predicted completion = queue delay (batch in flight + queued work, or the rest of a load; on a
continuous-batching loop the prefills scheduled ahead plus the slower decode beside its running
sequences)
+ service time (latency model) + transfer of inputs from where they are + load time when the
model is not loaded there (and the LoRA adapter's when the step has one the replica lacks) - expected prefix-cache saving (leading blocks the replica's prefix
index holds). Ties break on replica id, so equal inputs give equal choices.

Affinity: a session stays on the replica that served it last (it holds the KV prefix) as long as
that replica's queue delay is within ``balance_guard_us`` of the least loaded candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from control.core.routing.base import (
    MAX_ROUTE_CANDIDATES,
    Candidate,
    RouteChoice,
    RouteScore,
    RoutingContext,
    StepDemand,
)
from control.core.routing.transfer import inputs_us


@dataclass(frozen=True)
class PredictedCompletionConfig:
    balance_guard_us: int = field(
        default=50_000,
        metadata={
            "help": "affinity holds while the affine replica's queue delay is at most this "
            "much above the least loaded candidate's"
        },
    )
    use_prefix: bool = field(default=True, metadata={"help": "subtract predicted cache savings"})
    use_affinity: bool = field(default=True, metadata={"help": "keep sessions on their replica"})


def _service(demand: StepDemand, dt: str, ctx: RoutingContext) -> tuple[int, int]:
    """(forward, forward + decode) of the demand alone on device type ``dt``."""
    lat = ctx.latency
    fwd = lat.forward_us(demand.model_key, dt, 1, demand.input_tokens)
    if demand.output_tokens:
        return fwd, fwd + lat.decode_us(demand.model_key, dt, 1, demand.output_tokens)
    return fwd, fwd


def _parts(
    demand: StepDemand, c: Candidate, ctx: RoutingContext, use_prefix: bool, svc: tuple[int, int]
) -> tuple:
    """(total, replica id, queue, service, transfer, load, saving, hits) as a plain tuple:
    this runs once per candidate per decision, so it avoids building objects. ``svc`` is
    ``_service`` for the candidate's device type (computed once per type per decision)."""
    now = ctx.now
    load = max(0, int((c.ready_at - now) * 1e6)) if c.loading else 0
    if demand.adapter and not c.adapters.holds(demand.adapter):
        load += (
            demand.adapter_load_us or c.adapters.load_us
        )  # the replica loads the step's LoRA adapter first
    queue = max(0, int((c.busy_until - now) * 1e6)) + c.queue_us
    fwd, service = svc
    if c.loop_seqs:
        # a continuous loop: wait for the prefills scheduled ahead, then decode beside the
        # sequences already running (each step costs more with every one of them)
        queue += max(0, int((c.prefill_until - now) * 1e6))
        if demand.output_tokens:
            alone = service - fwd  # its decode with the loop to itself
            shared = ctx.latency.decode_us(
                demand.model_key, c.device.accelerator, c.loop_seqs + 1, demand.output_tokens
            )
            queue += shared - alone
    hits = c.prefix.match(demand.prefix_blocks) if use_prefix and demand.prefix_blocks else 0
    saving = 0
    if hits:
        rest = max(0, demand.input_tokens - hits * ctx.block_tokens)
        lat, dt = ctx.latency, c.device.accelerator
        saving = max(0, fwd - lat.forward_us(demand.model_key, dt, 1, rest))
    transfer = 0
    if demand.input_devices:
        transfer = inputs_us(ctx.transfer, demand.input_devices, demand.input_bytes, c.device)
    total = load + queue + service + transfer - saving
    return (total, c.replica_id, queue, service, transfer, load, saving, hits)


def score(
    demand: StepDemand, c: Candidate, ctx: RoutingContext, use_prefix: bool = True
) -> RouteScore:
    """Predicted completion of ``demand`` on ``c`` with its parts (all microseconds)."""
    svc = _service(demand, c.device.accelerator, ctx)
    total, rid, queue, service, transfer, load, saving, hits = _parts(
        demand, c, ctx, use_prefix, svc
    )
    return RouteScore(rid, total, queue, service, transfer, load, saving, hits)


def _as_score(p: tuple) -> RouteScore:
    total, rid, queue, service, transfer, load, saving, hits = p
    return RouteScore(rid, total, queue, service, transfer, load, saving, hits)


def _top(parts: list, best: RouteScore) -> tuple[RouteScore, ...]:
    """The best ``MAX_ROUTE_CANDIDATES`` scores, lowest first (one candidate: ``best`` alone,
    without sorting: the common case of a model with one replica)."""
    if len(parts) == 1:
        return (best,)
    return tuple([_as_score(p) for p in sorted(parts)[:MAX_ROUTE_CANDIDATES]])


class PredictedCompletionRouting:
    def __init__(self, config: PredictedCompletionConfig | None = None) -> None:
        self.config = config or PredictedCompletionConfig()

    def choose(
        self, demand: StepDemand, candidates: Sequence[Candidate], ctx: RoutingContext
    ) -> RouteChoice | None:
        if not candidates:
            return None
        use_prefix = self.config.use_prefix
        services: dict[str, tuple[int, int]] = {}
        parts = []
        for c in candidates:
            dt = c.device.accelerator
            svc = services.get(dt)
            if svc is None:
                svc = services[dt] = _service(demand, dt, ctx)
            parts.append(_parts(demand, c, ctx, use_prefix, svc))
        best_p = min(parts)  # (total, replica id, ...): ties break on replica id
        best = _as_score(best_p)
        top = _top(parts, best)
        affine_id = ctx.sessions.get(demand.session_id) if demand.session_id else None
        if self.config.use_affinity and affine_id is not None:
            affine_p = next((p for p in parts if p[1] == affine_id), None)
            if affine_p is not None:
                affine = _as_score(affine_p)
                least = min(p[2] for p in parts)
                gap = affine.queue_us - least
                if gap <= self.config.balance_guard_us:
                    why = (
                        f"session {demand.session_id} stays on {affine_id} "
                        f"(holds {affine.hit_blocks} prefix blocks; queue {gap} us above least loaded)"
                    )
                    return RouteChoice(affine, True, why, top)
                why = (
                    f"balance guard: {affine_id} is {gap} us behind the least loaded "
                    f"(limit {self.config.balance_guard_us} us); session {demand.session_id} moves "
                    f"to {best.replica_id}"
                )
                return RouteChoice(best, False, why, top)
        why = (
            f"lowest predicted completion {best.total_us} us on {best.replica_id} (queue "
            f"{best.queue_us}, service {best.service_us}, transfer {best.transfer_us}, load "
            f"{best.load_us}, cache saving {best.saving_us}) among {len(parts)} replicas"
        )
        return RouteChoice(best, False, why, top)
