"""Batches on the Ray executor, from ``submit`` to their completion, and lost actors.

The exactly-once rules are the local executor's (:mod:`control.executor.host.dispatch`): a
completed key is answered from the idempotency store (``replayed=True``), a key in flight is not
run twice, retriable failures and cancels are not stored. A batch waits in its slot's queue until fewer than ``DEPTH`` batches run on the actor;
it is then called with every input held by ANOTHER actor as an object reference of that
actor's ``export`` (Ray resolves it on the consumer's node; the driver never sees the data).

A batch whose text streams goes through the actor's generator method, its deltas reaching the
executor as they are produced (:mod:`.streams`); every other batch is one plain call.

As on the local executor, each replica has a circuit breaker (:mod:`.breakers`): a batch for a
replica whose breaker is open is refused at ``submit`` (``unavailable``, retriable) without
reaching its actor, half-open lets one probe through, and every batch that ended counts toward
it. Each batch is timed against its hang deadline while its actor runs it (:mod:`.deadlines`).

An actor that dies (a reference of its calls fails with Ray's ``RayActorError`` for it), stops
answering its status call (:mod:`.silence`) or hangs (a batch it runs passed its deadline,
:func:`~control.executor.ray.deadlines.kill_hung`; both are killed, :meth:`Flow.kill`): every batch sent to it or queued for it
completes failed retriable, once (``hang`` for the batch it was running when it hung, else
``worker_down``); its replicas and held outputs are forgotten; ``WorkerDown`` is emitted; a
fresh actor is started on the same node, and ``WorkerUp`` is emitted when it answers: the
runtime then reloads its replicas, as for a local worker. When the node left (Ray's node table
no longer has it alive) no actor is started again and the ``WorkerDown`` says so (``gone``).
Not thread-safe: called under the executor's lock (from the pump thread or a public method).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import replace
from typing import Any

import ray
from ray.exceptions import RayActorError

from control.executor.host.breaker import BreakerConfig
from control.executor.host.dispatch import failures
from control.executor.host.idempotency import IdempotencyStore
from control.executor.host.outputs import OutputDirectory
from control.executor.protocol import (
    Batch,
    InputRef,
    ItemCompleted,
    ItemResult,
    TokenDelta,
    WorkerDown,
    WorkerUp,
    wire,
)
from control.executor.ray import cluster, streams
from control.executor.ray.breakers import ReplicaBreakers
from control.executor.ray.deadlines import Deadlines
from control.executor.ray.moves import MoveLog
from control.executor.ray.pump import Pump
from control.executor.ray.room import Room
from control.executor.ray.slots import DEPTH, Slot

log = logging.getLogger(__name__)


class Flow:
    def __init__(self, pump: Pump, options: dict, now: Callable[[], float], capacity: int, *,
                 deadlines: Deadlines, breaker: BreakerConfig = BreakerConfig()):  # fmt: skip
        self.pump, self.options, self.now = pump, options, now
        self.deadlines = deadlines  # of the batches the actors run (hangs)
        self.breakers = ReplicaBreakers(breaker, pump.emit)  # one per replica
        self.room = Room()  # when each replica was last used (eviction)
        self.slots: dict[str, Slot] = {}
        self.store = IdempotencyStore(capacity)
        self.outputs = OutputDirectory(capacity)
        self.moves = MoveLog(capacity)
        self.inflight: set[str] = set()
        self.replica_dev: dict[str, str] = {}  # replica id -> device id
        self.stopping = False
        #: called with a slot whose actor died, before it is restarted (pending loads fail)
        self.on_lost: Callable[[Slot], None] = lambda slot: None

    # ---- actors

    def start_actor(self, slot: Slot) -> None:
        slot.generation += 1
        slot.up, slot.status_pending = False, True
        slot.actor = cluster.start_actor(slot.device, slot.place, self.options)
        slot.actor_hex = cluster.actor_id(slot.actor)
        gen = slot.generation
        ref = slot.actor.status.options(concurrency_group="ctl").remote()
        self.pump.watch(ref, lambda fut: self._on_status(slot, gen, fut))

    def ping(self, slot: Slot) -> None:
        if slot.up and not slot.status_pending:
            slot.status_pending = True
            gen = slot.generation
            ref = slot.actor.status.options(concurrency_group="ctl").remote()
            self.pump.watch(ref, lambda fut: self._on_status(slot, gen, fut))

    def _on_status(self, slot: Slot, gen: int, fut: Any) -> None:
        if gen != slot.generation:
            return
        slot.status_pending = False
        try:
            pid, slot.busy, _, slot.used_mib = fut.result()
        except RayActorError as err:
            return self.lost(slot, f"actor died: {type(err).__name__}")
        except Exception as err:  # noqa: BLE001 (its constructor raised, or its node is gone)
            cause = getattr(err, "cause", None) or err  # what the actor raised, not Ray's wrap
            return self.lost(slot, f"actor failed: {type(cause).__name__}: {cause}")
        slot.last_seen = self.now()
        if not slot.up:
            slot.up, slot.pid = True, pid
            self.pump.emit(WorkerUp(slot.device_id, pid, slot.restarts))
            self.send(slot)

    def kill(self, slot: Slot, reason: str, hung: Collection[str] = ()) -> None:
        """Kill the slot's actor, judged lost while alive (hung, or silent: it must never answer
        later, and its resources go to the fresh one), and report it lost (:meth:`lost`)."""
        try:
            ray.kill(slot.actor, no_restart=True)
        except Exception as err:  # noqa: BLE001 (already gone, or its node: lost all the same)
            log.warning("killing the actor of %s: %s", slot.device_id, err)
        self.lost(slot, reason, hung)

    def lost(self, slot: Slot, reason: str, hung: Collection[str] = ()) -> None:
        """The slot's actor died (or was killed: ``hung`` names the batches it was running
        then, which fail ``hang``): report what it held lost, then restart it (module doc)."""
        if self.stopping or not slot.actor_hex:
            return
        log.warning("actor of %s down: %s", slot.device_id, reason)
        slot.generation += 1  # replies of the dead actor are ignored from now on
        slot.up, slot.actor_hex, slot.status_pending = False, "", False
        self.deadlines.forget(slot.device_id)
        why = f"worker {slot.device_id} down: {reason}"
        failed: list[str] = []
        for batch in [*slot.running.values(), *slot.queue]:
            cause = "hang" if batch.batch_id in hung else "worker_down"
            results = failures(batch, slot.device_id, why, cause)
            failed.extend(r.idempotency_key for r in results if r.idempotency_key in self.inflight)
            self.finish(results)
            self._judge(batch, results, self.now())
        slot.running.clear()
        slot.queue.clear()
        lost = tuple(sorted(slot.replicas))
        for replica_id in lost:
            self.replica_dev.pop(replica_id, None)
        slot.replicas.clear()
        self.outputs.forget_device(slot.device_id)
        self.on_lost(slot)
        gone = not cluster.node_alive(slot.place.node_id)
        self.pump.emit(WorkerDown(slot.device_id, reason, lost, tuple(failed), gone=gone))
        if gone:
            slot.gone = True
        else:
            slot.restarts += 1
            self.start_actor(slot)

    # ---- batches

    def submit(self, batch: Batch) -> None:
        fresh = []
        for item in batch.items:
            replayed = self.store.replay(item.idempotency_key)
            if replayed is not None:
                self.pump.emit(ItemCompleted(replayed))
            elif item.idempotency_key not in self.inflight and item not in fresh:
                fresh.append(item)
        if not fresh:
            return
        batch = batch if len(fresh) == len(batch.items) else replace(batch, items=tuple(fresh))
        device_id = self.replica_dev.get(batch.replica_id)
        slot = self.slots.get(device_id or "")
        if slot is None or not slot.up:
            why = f"replica {batch.replica_id} is not loaded"
            return self._refuse(batch, device_id or "?", why)
        now = self.now()
        if (why := self.breakers.refusal(batch.replica_id, now)) is not None:
            return self._refuse(batch, slot.device_id, why)  # the actor never sees it
        self.room.used(batch.replica_id, now)
        self.inflight.update(i.idempotency_key for i in batch.items)
        slot.queue.append(batch)
        self.send(slot)

    def _refuse(self, batch: Batch, device_id: str, why: str) -> None:
        """Refused before reaching an actor (not loaded, breaker open): retriable elsewhere."""
        for result in failures(batch, device_id, why, "unavailable"):
            self.pump.emit(ItemCompleted(result))

    def send(self, slot: Slot) -> None:
        """Call the actor with queued batches while fewer than DEPTH run there (a batch whose
        text streams through the actor's generator method, :mod:`.streams`)."""
        while slot.up and slot.queue and len(slot.running) < DEPTH:
            batch = slot.queue.popleft()
            keys, refs = self._moved_inputs(batch, slot.device_id)
            slot.running[batch.batch_id] = batch
            self.deadlines.next(slot.device_id, slot.running, self.now())
            gen = slot.generation
            if streams.wanted(batch):
                streams.call(slot.actor, batch, keys, refs, self.pump,
                             lambda msgs, g=gen: self._on_deltas(slot, g, msgs),
                             lambda fut, b=batch, g=gen: self._on_run(slot, g, b, fut))  # fmt: skip
                continue
            ref = slot.actor.run.remote(batch, keys, *refs)
            self.pump.watch(ref, lambda fut, b=batch, g=gen: self._on_run(slot, g, b, fut))

    def _moved_inputs(self, batch: Batch, here: str) -> tuple[tuple, list]:
        """The inputs of ``batch`` held by other actors: their keys, and references to them."""
        keys: list[tuple[str, str, str]] = []
        refs = []
        for item in batch.items:
            for value in item.inputs.values():
                if not isinstance(value, InputRef):
                    continue
                key = (value.run_id, value.node_id, value.field)
                holder = self.outputs.holder(value.run_id, value.node_id)
                if holder is None or holder == here or key in keys:
                    continue  # held here, or lost: the actor reports a lost input itself
                keys.append(key)
                refs.append(self.slots[holder].actor.export.remote(*key))
        return tuple(keys), refs

    def _on_run(self, slot: Slot, gen: int, batch: Batch, fut: Any) -> None:
        if gen != slot.generation:
            return  # its actor died: the batch was reported with it
        slot.running.pop(batch.batch_id, None)
        results: list[ItemResult] = []
        try:
            sent = fut.result()
        except RayActorError as err:
            if err.actor_id == slot.actor_hex:
                slot.running[batch.batch_id] = batch  # reported with the others it held
                return self.lost(slot, f"actor died: {type(err).__name__}")
            why = f"an input was lost with the actor holding it ({type(err).__name__})"
            lost = tuple(sorted({i.node_id for it in batch.items for i in it.inputs.values()
                                 if isinstance(i, InputRef)}))  # fmt: skip
            results = [replace(r, lost=lost or None)
                       for r in failures(batch, slot.device_id, why, "unavailable")]  # fmt: skip
        except Exception as err:  # noqa: BLE001 (the call itself failed, e.g. unpickling)
            results = failures(batch, slot.device_id, f"{type(err).__name__}: {err}",
                               "model_error")  # fmt: skip
        else:
            for msg in sent:
                if msg[0] == wire.DELTA:
                    self.pump.emit(TokenDelta(*msg[1:]))
                else:
                    results.extend(msg[2])
            self.moves.record(results)
        now = self.now()
        self._judge(batch, results, now)  # first: a breaker that opens is known before the
        self.finish(results)  # failures that opened it (never retried onto the open replica)
        self.deadlines.ended(slot.device_id, batch, results)
        self.deadlines.next(slot.device_id, slot.running, now)  # the batch the actor runs next
        self.send(slot)

    def _on_deltas(self, slot: Slot, gen: int, messages: list[tuple]) -> None:
        """Text a streamed batch produced so far (its results come to ``_on_run``)."""
        if gen == slot.generation:  # else its actor died: nothing of it is reported any more
            for msg in messages:
                self.pump.emit(TokenDelta(*msg[1:]))

    def _judge(self, batch: Batch, results: list[ItemResult], now: float) -> None:
        """``batch`` ended with ``results``: its replica's breaker counts them, and the
        replica was used ``now`` (the LRU order of eviction)."""
        self.room.used(batch.replica_id, now)
        self.breakers.ended(batch.replica_id, results, now)

    def finish(self, results: Iterable[ItemResult]) -> None:
        """Report each result of a key still in flight, once."""
        for result in results:
            if result.idempotency_key not in self.inflight:
                continue
            self.inflight.discard(result.idempotency_key)
            self.store.keep(result)
            if result.ok:
                self.outputs.record(result)
            self.pump.emit(ItemCompleted(result))

    def cancel(self, keys: Iterable[str]) -> None:
        wanted = set(keys) & self.inflight
        if not wanted:
            return
        for slot in self.slots.values():
            kept = []
            for batch in slot.queue:
                gone = tuple(i for i in batch.items if i.idempotency_key in wanted)
                stay = tuple(i for i in batch.items if i.idempotency_key not in wanted)
                if gone:
                    self.finish(failures(replace(batch, items=gone), slot.device_id,
                                         "cancelled before it started", "cancelled"))  # fmt: skip
                if stay:
                    kept.append(replace(batch, items=stay) if gone else batch)
                elif gone:  # the whole batch is out: it ended without running
                    self._judge(batch, [], self.now())
            slot.queue.clear()
            slot.queue.extend(kept)

    def release_run(self, run_id: str) -> None:
        """A finished run: its outputs' holders, moves and stored results are forgotten."""
        self.outputs.release_run(run_id)
        self.moves.release_run(run_id)
        self.store.release_run(run_id)
