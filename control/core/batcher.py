"""Local scheduling: form batches on free replicas and dispatch them.

Per dirty replica (queue changed, became free, or a batching deadline passed): ask tenancy for
the queue order, check headroom on reserved devices, let the batching policy decide, then charge
each dispatched step and emit one ``Dispatch``. A tool step is dispatched alone on the host.
"""

from __future__ import annotations

from control.core.actions import BatchItem, Dispatch
from control.core.batching.base import FormedBatch, take_fitting
from control.core.context import CoreState
from control.core.latency import service_us
from control.core.loads import mark_used
from control.core.queueing import dequeue
from control.core.state import InflightBatch, QueuedStep, ReplicaRecord
from control.core.tenancy.base import PoolUsage
from control.core.types import ReplicaState


def _item(step: QueuedStep) -> BatchItem:
    ref, node = step.ref, step.node
    # positional, in BatchItem's field order: this runs for every dispatched step
    return BatchItem(
        ref.key, ref.run_id, ref.node_id, ref.attempt, ref.chunk, ref.idempotency_key,
        node.kind, ref.inputs, step.input_tokens, step.max_output_tokens, step.prefix_blocks,
        step.hit_blocks, node.params,
    )  # fmt: skip


def _launch(st: CoreState, steps: list[QueuedStep], rec: ReplicaRecord | None, padded: int,
            predicted: int, reason: str) -> None:  # fmt: skip
    batch_id = st.next_id("b")
    for s in steps:
        s.batch_id = batch_id
        s.dispatched_at = st.now
        st.tenancy.charge(s.work.tenant_id, s.cost_units, st.now, key=s.key)
        if s.node.timeout_s is not None:
            st.arm(st.now + s.node.timeout_s, "timeout", s.key)
    st.batches[batch_id] = InflightBatch(
        batch_id, rec.replica_id if rec else None, rec.model.key if rec else None,
        {s.key: s for s in steps}, st.now, predicted,
    )  # fmt: skip
    st.counters["decisions.dispatched_steps"] += len(steps)
    st.emit(
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
        )
    )


def dispatch_tool(st: CoreState, step: QueuedStep) -> None:
    """Tool steps (vector search, router, segment) run at once on the host, unbatched."""
    _launch(st, [step], None, step.input_tokens, 0, f"tool {step.node.tool} runs on the host")


def _headroom_ok(st: CoreState, rec: ReplicaRecord, steps: list[QueuedStep]) -> list[QueuedStep]:
    """Steps allowed on a reserved device by the tenancy half's headroom check, in order."""
    if rec.device.device_id not in st.reserved_devices:
        return steps
    usage = {}
    for dev_id in sorted(st.reserved_devices):
        dev = st.cluster.devices.get(dev_id)
        if dev is None:
            continue
        reps = [st.cluster.replicas[r] for r in dev.replicas]
        cap = sum(r.model.max_batch_size for r in reps) or 1
        used = sum(len(st.batches[b].items) for r in reps for b in r.running if b in st.batches)
        usage[dev_id] = PoolUsage(dev_id, cap, used)
    allowed = []
    for s in steps:
        verdict = st.tenancy.headroom_check(rec.device.device_id, s.work.priority_class, usage)
        if verdict.allowed:
            allowed.append(s)
        else:
            st.counters["batching.headroom_refused"] += 1
    if len(allowed) < len(steps):
        # usage and the tenancy half's view change without touching this queue: look again
        # at the next step
        st.headroom_blocked.add(rec.replica_id)
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
    st: CoreState, rec: ReplicaRecord, slots: int
) -> tuple[list[QueuedStep], FormedBatch | None] | None:
    """(queue in service order, formed batch or None to wait), or None when headroom holds
        every step back. A continuous replica that is running is joined (``slots`` free); a batch
    sent ahead to a static replica forms by the policy like any other."""
    by_key = rec.queue
    queued = list(by_key.values())
    joining = bool(rec.running) and rec.model.continuous_batching
    if rec.device.device_id not in st.reserved_devices:
        formed: FormedBatch | None
        if joining:
            formed = _join(queued, rec, slots)
        else:
            formed = st.batching.form(queued, min([s.arrival for s in queued]), rec.model, st.now)
        if formed is None or formed.count == len(queued):
            # waiting, or the whole queue goes out as one batch: the fair-share order cannot
            # change which steps are dispatched, so the queue is taken as bound (late binding
            # fills it in the tenancy half's order already) and ``order`` is skipped
            return queued, formed
    ordered_work = st.tenancy.order([s.work for s in queued], st.now)
    ordered = _headroom_ok(st, rec, [by_key[w.key] for w in ordered_work])
    if not ordered:
        return None
    if joining:
        return ordered, _join(ordered, rec, slots)
    return ordered, st.batching.form(ordered, min([s.arrival for s in ordered]), rec.model, st.now)


def form_batch(st: CoreState, rec: ReplicaRecord) -> None:
    """Dispatch one batch on a ready replica that can take one (free; a continuous replica with
    free slots; or a static one whose lone batch ends within ``dispatch_ahead_us``, and then
    only a batch :func:`ahead_worth_sending`), or arm a wake-up at the batching deadline."""
    if rec.state != ReplicaState.READY or not rec.queue:
        return
    slots = rec.free_slots(st.now, st.dispatch_ahead_s)
    if slots <= 0:
        return
    picked = _choose(st, rec, slots)
    if picked is None:
        return
    ordered, formed = picked
    if formed is not None and rec.running and not ahead_worth_sending(st, rec, ordered):
        return
    if formed is None:
        oldest = min([s.arrival for s in ordered])
        st.arm(st.batching.deadline(oldest, rec.model), "batch", rec.replica_id)
        st.counters["batching.waits"] += 1
        return
    chosen = ordered[: formed.count]
    for s in chosen:
        dequeue(st, s, dispatched=True)
    longest = max([s.input_tokens for s in chosen])  # list comprehensions: no generator frames
    out = max([s.max_output_tokens for s in chosen])
    acc, n = rec.device.accelerator, len(chosen)
    prefill_us = 0
    if rec.model.continuous_batching:
        # the prefill runs as one iteration after those already scheduled (the running
        # sequences wait for it), or in chunks beside their decode tokens; then every sequence
        # decodes together at the loop's new size
        if rec.model.prefill_chunk_tokens:
            tokens = sum([s.input_tokens for s in chosen])
            prefill_us = chunked_prefill_us(st, rec, acc, tokens)
        else:
            prefill_us = st.latency.forward_us(rec.model.key, acc, n, longest)
        decode = st.latency.decode_us(rec.model.key, acc, rec.running_seqs + n, out) if out else 0
        backlog = max(0, int((rec.prefill_until - st.now) * 1e6)) if rec.running else 0
        predicted = backlog + prefill_us + decode
    else:
        predicted = service_us(st.latency, rec.model.key, acc, n, longest, out)
    # sent ahead: it starts when the batch in flight ends
    ahead = bool(rec.running) and not rec.model.continuous_batching
    start = max(st.now, rec.busy_until) if ahead else st.now
    reason = f"{rec.replica_id}: {formed.reason}"
    if ahead:
        st.counters["batching.sent_ahead"] += 1
    if start > st.now:
        reason += f" (sent ahead: starts when the batch in flight ends, in {(start - st.now) * 1e3:.1f} ms)"
    elif ahead:  # the batch in flight outlived its prediction: the table is too optimistic
        reason += " (sent ahead: starts when the batch in flight ends, past its predicted end)"
    _launch(st, chosen, rec, formed.padded_tokens, predicted, reason)
    batch_id = chosen[0].batch_id
    assert batch_id is not None  # set by _launch
    rec.start_running(batch_id, n, st.now, start + predicted / 1e6, prefill_us / 1e6)
    mark_used(st, rec)
    arm_ahead(st, rec)


def ahead_worth_sending(st: CoreState, rec: ReplicaRecord, ordered: list[QueuedStep]) -> bool:
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
    cap = st.batching.max_batch_size(rec.model)
    count, _, full, _ = take_fitting(ordered, cap, rec.model.max_batch_tokens)
    return full or count >= st.config.binding.ahead_min_fill * cap


def chunked_prefill_us(st: CoreState, rec: ReplicaRecord, acc: str, tokens: int) -> int:
    """Predicted time to prefill ``tokens`` prompt tokens on a chunked loop running
    ``rec.running_seqs`` sequences: iterations of at most ``prefill_chunk_tokens`` tokens, the
    running sequences' decode tokens first (as the executor packs them), each one forward."""
    chunk, seqs = rec.model.prefill_chunk_tokens, rec.running_seqs
    room = max(1, chunk - seqs)
    full, rest = divmod(max(1, tokens), room)
    fwd = st.latency.forward_us
    total = full * fwd(rec.model.key, acc, 1, seqs + room) if full else 0
    return total + (fwd(rec.model.key, acc, 1, seqs + rest) if rest else 0)


def arm_ahead(st: CoreState, rec: ReplicaRecord) -> None:
    """With dispatch ahead on, wake the core when a static replica's lone batch is within
    ``dispatch_ahead_us`` of its end: its successor is bound and sent then (nothing else
    happens at that instant to make the core look)."""
    ahead_s = st.dispatch_ahead_s
    if ahead_s > 0.0 and len(rec.running) == 1 and rec.sends_ahead:
        st.arm(max(st.now, rec.busy_until - ahead_s), "ahead", rec.replica_id)
