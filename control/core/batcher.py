"""Local scheduling: form batches on free replicas and dispatch them.

Per dirty replica (queue changed, became free, or a batching deadline passed): ask tenancy for
the queue order, check headroom on reserved devices, let the batching policy decide, then charge
each dispatched step and emit one ``Dispatch``. A tool step is dispatched alone on the host.
"""

from __future__ import annotations

from control.core.actions import BatchItem, Dispatch
from control.core.batching.base import FormedBatch, take_fitting
from control.core.cluster import Cluster
from control.core.context import Policies
from control.core.latency import LatencyModel, service_us
from control.core.loads import mark_used
from control.core.parts import ActionLog, Ids, Queues, Timers
from control.core.queueing import dequeue
from control.core.routing.adapters import charge_switches, step_adapter, within_slots
from control.core.state import InflightBatch, QueuedStep, ReplicaRecord
from control.core.tenancy.base import PoolUsage
from control.core.types import ReplicaState


def _item(step: QueuedStep) -> BatchItem:
    ref, node = step.ref, step.node
    # positional, in BatchItem's field order: this runs for every dispatched step
    return BatchItem(
        ref.key, ref.run_id, ref.node_id, ref.attempt, ref.chunk, ref.idempotency_key,
        node.kind, ref.inputs, step.input_tokens, step.max_output_tokens, step.prefix_blocks,
        step.hit_blocks, node.params, step.work.arrival, step.arrival, step.route,
        step_adapter(step), step.variant,
    )  # fmt: skip


def _launch(
    pol: Policies, cluster: Cluster, timers: Timers, ids: Ids, log: ActionLog,
    steps: list[QueuedStep], rec: ReplicaRecord | None, padded: int, predicted: int, reason: str,
    now: float, adapter_us: int = 0,
) -> None:  # fmt: skip
    """Dispatch ``steps`` as one batch: charge each to its tenant, arm its timeout, record the
    batch in flight and emit its ``Dispatch``."""
    batch_id = ids.next_id("b")
    tenancy = pol.tenancy
    for s in steps:
        s.batch_id = batch_id
        s.dispatched_at = now
        tenancy.charge(s.work.tenant_id, s.cost_units, now, key=s.key)
        if s.node.timeout_s is not None:
            timers.arm(now + s.node.timeout_s, "timeout", s.key)
    cluster.batches[batch_id] = InflightBatch(
        batch_id, rec.replica_id if rec else None, rec.model.key if rec else None,
        {s.key: s for s in steps}, now, predicted,
    )  # fmt: skip
    log.counters["decisions.dispatched_steps"] += len(steps)
    log.emit(
        Dispatch(
            batch_id=batch_id,
            replica_id=rec.replica_id if rec else None,
            model_key=rec.model.key if rec else None,
            tool=None if rec else steps[0].node.tool,
            device_ids=tuple([d.device_id for d in rec.devices]) if rec else (),
            items=tuple([_item(s) for s in steps]),
            padded_tokens=padded,
            predicted_us=predicted,
            reason=reason,
            adapter_load_us=adapter_us,
        )
    )


def dispatch_tool(
    pol: Policies, cluster: Cluster, timers: Timers, ids: Ids, log: ActionLog, step: QueuedStep,
    now: float,
) -> None:  # fmt: skip
    """Tool steps (vector search, router, segment) run at once on the host, unbatched."""
    why = f"tool {step.node.tool} runs on the host"
    _launch(pol, cluster, timers, ids, log, [step], None, step.input_tokens, 0, why, now)


def _headroom_ok(
    pol: Policies, cluster: Cluster, queues: Queues, log: ActionLog, rec: ReplicaRecord,
    steps: list[QueuedStep],
) -> list[QueuedStep]:  # fmt: skip
    """Steps allowed on a reserved device by the tenancy half's headroom check, in order.

    The pool is counted as the batch will find it when it starts: a static replica's own
    running batch is left out (the batch is sent ahead only when that one is about to end,
    and starts after it), as binding projects it (``headroom_fit.projected_usage``)."""
    if rec.device.device_id not in pol.reserved_devices:
        return steps
    usage = {}
    batches = cluster.batches
    own = None if rec.model.continuous_batching else rec.replica_id
    for dev_id in sorted(pol.reserved_devices):
        dev = cluster.devices.get(dev_id)
        if dev is None:
            continue
        reps = [cluster.replicas[r] for r in dev.replicas]
        cap = sum(r.model.max_batch_size for r in reps) or 1
        used = sum(
            len(batches[b].items)
            for r in reps
            if r.replica_id != own
            for b in r.running
            if b in batches
        )
        usage[dev_id] = PoolUsage(dev_id, cap, used)
    allowed = []
    for s in steps:
        verdict = pol.tenancy.headroom_check(rec.device.device_id, s.work.priority_class, usage)
        if verdict.allowed:
            allowed.append(s)
        else:
            log.counters["batching.headroom_refused"] += 1
    if len(allowed) < len(steps):
        # usage and the tenancy half's view change without touching this queue: look again
        # at the next step
        queues.headroom_blocked.add(rec.replica_id)
    return allowed


def _join(ordered: list[QueuedStep], rec: ReplicaRecord, slots: int) -> FormedBatch:
    """Steps that join a continuous replica's running decode loop: as many as its free slots
    and the prefill token cap allow, at once. Waiting for a fuller batch would only delay
    them: the loop runs anyway, and a joiner costs the running sequences one prefill."""
    count, padded, _full, _why = take_fitting(ordered, slots, rec.model.max_batch_tokens)
    reason = (
        f"{count} joins the running decode loop ({rec.running_seqs} sequences running, "
        f"{slots} free)"
    )
    return FormedBatch(count, padded, reason)


def _choose(
    pol: Policies, cluster: Cluster, queues: Queues, log: ActionLog, rec: ReplicaRecord,
    slots: int, now: float,
) -> tuple[list[QueuedStep], FormedBatch | None] | None:  # fmt: skip
    """(queue in service order, formed batch or None to wait), or None when headroom holds
        every step back. A continuous replica that is running is joined (``slots`` free); a batch
    sent ahead to a static replica forms by the policy like any other."""
    by_key = rec.queue
    queued = list(by_key.values())
    joining = bool(rec.running) and rec.model.continuous_batching
    if rec.device.device_id not in pol.reserved_devices:
        formed: FormedBatch | None
        if joining:
            formed = _join(queued, rec, slots)
        else:
            formed = pol.batching.form(queued, min([s.arrival for s in queued]), rec.model, now)
        if formed is None or formed.count == len(queued):
            # waiting, or the whole queue goes out as one batch: the fair-share order cannot
            # change which steps are dispatched, so the queue is taken as bound (late binding
            # fills it in the tenancy half's order already) and ``order`` is skipped
            return queued, formed
    ordered_work = pol.tenancy.order([s.work for s in queued], now)
    ordered = _headroom_ok(pol, cluster, queues, log, rec, [by_key[w.key] for w in ordered_work])
    if not ordered:
        return None
    if joining:
        return ordered, _join(ordered, rec, slots)
    return ordered, pol.batching.form(ordered, min([s.arrival for s in ordered]), rec.model, now)


def form_batch(
    pol: Policies, cluster: Cluster, queues: Queues, timers: Timers, ids: Ids, log: ActionLog,
    rec: ReplicaRecord, now: float,
) -> None:  # fmt: skip
    """Dispatch one batch on a ready replica that can take one (free; a continuous replica with
    free slots; or a static one whose lone batch ends within ``dispatch_ahead_us``, and then
    only a batch :func:`ahead_worth_sending`), or arm a wake-up at the batching deadline."""
    if rec.state != ReplicaState.READY or not rec.queue:
        return
    slots = rec.free_slots(now, pol.dispatch_ahead_s)
    if slots <= 0:
        return
    picked = _choose(pol, cluster, queues, log, rec, slots, now)
    if picked is None:
        return
    ordered, formed = picked
    if formed is None and rec.running and not rec.model.continuous_batching:
        formed = _ahead(pol, rec, ordered)
    if formed is not None and rec.running and not ahead_worth_sending(pol, rec, ordered):
        return
    if formed is None:
        oldest = min([s.arrival for s in ordered])
        timers.arm(pol.batching.deadline(oldest, rec.model), "batch", rec.replica_id)
        log.counters["batching.waits"] += 1
        return
    chosen = within_slots(ordered[: formed.count], rec)  # at most max_adapters adapters
    for s in chosen:
        dequeue(pol, cluster, queues, s, True, now)
    n = len(chosen)
    adapter_us = charge_switches(rec, chosen)  # adapters the replica lacks load first
    predicted, prefill_us = _predict(pol, rec, chosen, now, adapter_us)
    # sent ahead: it starts when the batch in flight ends
    ahead = bool(rec.running) and not rec.model.continuous_batching
    start = max(now, rec.busy_until) if ahead else now
    reason = f"{rec.replica_id}: {formed.reason}"
    if ahead:
        log.counters["batching.sent_ahead"] += 1
    if start > now:
        reason += (
            f" (sent ahead: starts when the batch in flight ends, in {(start - now) * 1e3:.1f} ms)"
        )
    elif ahead:  # the batch in flight outlived its prediction: the table is too optimistic
        reason += " (sent ahead: starts when the batch in flight ends, past its predicted end)"
    _launch(pol, cluster, timers, ids, log, chosen, rec, formed.padded_tokens, predicted, reason,
            now, adapter_us)  # fmt: skip
    batch_id = chosen[0].batch_id
    assert batch_id is not None  # set by _launch
    rec.start_running(batch_id, n, now, start + predicted / 1e6, prefill_us / 1e6)
    mark_used(cluster, rec, now)
    arm_ahead(pol, timers, rec, now)


def _ahead(pol: Policies, rec: ReplicaRecord, ordered: list[QueuedStep]) -> FormedBatch:
    """The batch a busy static replica is sent ahead when its policy would still wait: what
    is queued, within the limits. Waiting for company is for a free replica (its device idles
    meanwhile); a batch sent ahead waits behind the one in flight anyway, and holding it back
    would leave the device idle for the completion's round trip. ``ahead_worth_sending``
    still decides whether it goes."""
    count, padded, _, _ = take_fitting(ordered, pol.batching.max_batch_size(rec.model),
                                       rec.model.max_batch_tokens)  # fmt: skip
    return FormedBatch(count, padded, f"{count} items sent ahead (the policy would wait)")


def _predict(
    pol: Policies, rec: ReplicaRecord, chosen: list[QueuedStep], now: float, adapter_us: int = 0
) -> tuple[int, int]:
    """(predicted us until the batch ``chosen`` ends on ``rec``, its prefill us on a continuous
    replica, else 0). On a continuous replica the prefill runs as one iteration after those
    already scheduled (the running sequences wait for it), or in chunks beside their decode
    tokens; then every sequence decodes together at the loop's new size. A prompt's predicted
    prefix cache hit is not prefilled (the replica computes only the rest). ``adapter_us``: the
    LoRA adapters it loads first."""
    latency, bt = pol.latency, pol.config.prefix_block_tokens
    longest = max([s.prefill_tokens(bt) for s in chosen])  # list comprehensions: no generators
    out = max([s.max_output_tokens for s in chosen])
    acc, n, key = rec.device.accelerator, len(chosen), rec.model.key
    if not rec.model.continuous_batching:
        return adapter_us + service_us(latency, key, acc, n, longest, out), 0
    if rec.model.prefill_chunk_tokens:
        prefill_us = chunked_prefill_us(
            latency, rec, acc, sum([s.prefill_tokens(bt) for s in chosen])
        )
    else:
        prefill_us = latency.forward_us(key, acc, n, longest)
    decode = latency.decode_us(key, acc, rec.running_seqs + n, out) if out else 0
    backlog = max(0, int((rec.prefill_until - now) * 1e6)) if rec.running else 0
    return adapter_us + backlog + prefill_us + decode, prefill_us


def ahead_worth_sending(pol: Policies, rec: ReplicaRecord, ordered: list[QueuedStep]) -> bool:
    """Whether the batch formed of ``ordered`` goes to a replica still running one (a static
    replica within ``dispatch_ahead_us`` of its end; a continuous one is joined at once).

    Yes when it is full (size or tokens) or holds at least ``ahead_min_fill`` of the batch
    limit in force. Sending it spares the device the completion's round trip (5-15 ms live, a
    fixed cost per batch that a full-only rule paid whenever the queue was a few items short
    of a full batch, i.e. at 80-100 % load). Below the fill it waits for the completion or to
    grow: a tiny batch pays a forward's fixed cost for few items, and when the predicted end is
    too early (an unprofiled model) the instant is reached at once, so sending any queue would
    alternate big and tiny batches. Under load the batches sent ahead grow past the fill by
    themselves: the next one is taken when the one running ends, with all that queued."""
    if rec.model.continuous_batching:
        return True
    cap = pol.batching.max_batch_size(rec.model)
    count, _, full, _ = take_fitting(ordered, cap, rec.model.max_batch_tokens)
    return full or count >= pol.config.binding.ahead_min_fill * cap


def chunked_prefill_us(latency: LatencyModel, rec: ReplicaRecord, acc: str, tokens: int) -> int:
    """Predicted time to prefill ``tokens`` prompt tokens on a chunked loop running
    ``rec.running_seqs`` sequences: iterations of at most ``prefill_chunk_tokens`` tokens, the
    running sequences' decode tokens first (as the executor packs them), each one forward."""
    chunk, seqs = rec.model.prefill_chunk_tokens, rec.running_seqs
    room = max(1, chunk - seqs)
    full, rest = divmod(max(1, tokens), room)
    fwd = latency.forward_us
    total = full * fwd(rec.model.key, acc, 1, seqs + room) if full else 0
    return total + (fwd(rec.model.key, acc, 1, seqs + rest) if rest else 0)


def arm_ahead(pol: Policies, timers: Timers, rec: ReplicaRecord, now: float) -> None:
    """With dispatch ahead on, wake the core when a static replica's lone batch is within
    ``dispatch_ahead_us`` of its end: its successor is bound and sent then (nothing else
    happens at that instant to make the core look)."""
    ahead_s = pol.dispatch_ahead_s
    if ahead_s > 0.0 and len(rec.running) == 1 and rec.sends_ahead:
        timers.arm(max(now, rec.busy_until - ahead_s), "ahead", rec.replica_id)
