"""The continuous replicas' engines on the driver's clock (seconds): :class:`Lanes`.

One :class:`~sim.continuous.ContinuousEngine` per continuous replica with batches in flight,
each on its own microsecond timeline whose origin is the clock time it started; the simulated
executor joins batches through it and reads their latest timings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sim.continuous import ContinuousEngine, DecodeCost, Joiner, PrefillCost, Timing


@dataclass(frozen=True)
class Joined:
    """A batch's latest timing on its lane: ``dispatch_us`` is its dispatch instant on the
    engine's timeline (so ``timing.end_us - dispatch_us`` is its time from dispatch to end) and
    ``end_s`` its end on the clock. ``payload`` is what the caller joined it with."""

    batch_id: str
    payload: object
    timing: Timing
    dispatch_us: int
    end_s: float


class _Lane:
    __slots__ = ("origin", "engine", "device_ids", "batches")

    def __init__(
        self, origin: float, engine: ContinuousEngine, device_ids: tuple[str, ...]
    ) -> None:
        self.origin = origin  # the clock time of the engine's time 0
        self.engine = engine
        self.device_ids = device_ids
        self.batches: dict[str, Joined] = {}  # in flight, with its latest timing


class Lanes:
    """The engines of the continuous replicas that have batches in flight, mapped to the
    driver's clock (seconds). A replica's engine lives from the dispatch that finds it idle to
    the release of its last batch, so a batch alone on an idle replica is timed from exactly
    its dispatch instant."""

    def __init__(self) -> None:
        self._lanes: dict[str, _Lane] = {}

    def join(
        self,
        replica_id: str,
        device_ids: tuple[str, ...],
        now: float,
        decode: DecodeCost,
        joiner: Joiner,
        payload: object,
        prefill: PrefillCost | None = None,
        chunk_tokens: int = 0,
    ) -> list[Joined]:
        """Admit a batch dispatched at ``now`` (``joiner.arrive_us``: its transfer time, an
        offset from ``now``; ``decode``, ``prefill`` and ``chunk_tokens``: the replica's costs
        and chunking, used when it starts an engine). Returns the new timings: the joiner's
        first, then those of the batches it delays."""
        lane = self._lanes.get(replica_id)
        if lane is None:
            engine = ContinuousEngine(decode, prefill, chunk_tokens)
            lane = self._lanes[replica_id] = _Lane(now, engine, device_ids)
        at = round((now - lane.origin) * 1e6)
        j = replace(joiner, arrive_us=at + joiner.arrive_us)
        changed = lane.engine.join(j, at)
        mine = changed[j.batch_id]
        out = [Joined(j.batch_id, payload, mine, at, lane.origin + mine.end_us / 1e6)]
        lane.batches[j.batch_id] = out[0]
        for bid, tm in changed.items():
            if bid != j.batch_id:
                x = lane.batches[bid]
                end_s = lane.origin + tm.end_us / 1e6
                x = lane.batches[bid] = Joined(bid, x.payload, tm, x.dispatch_us, end_s)
                out.append(x)
        return out

    def release(self, replica_id: str, batch_id: str) -> Joined:
        """A batch completes: its final timing. A replica with none left in flight forgets its
        engine."""
        lane = self._lanes[replica_id]
        done = lane.batches.pop(batch_id)
        if not lane.batches:
            del self._lanes[replica_id]
        return done

    def device_down(self, device_id: str) -> None:
        """A device failed: the loops of replicas on it are gone, with their batches."""
        for rid in [r for r, x in self._lanes.items() if device_id in x.device_ids]:
            del self._lanes[rid]

    def __len__(self) -> int:
        return len(self._lanes)
