"""Iteration-level (continuous) batching on one replica: when each batch's sequences end.

A vLLM-like engine. Batches reach the engine at ``arrive_us`` (after their transfers) and wait
for the end of the iteration in progress; then, one at a time in order of arrival, each runs its
prefill as one iteration of its own (the running sequences stall), and its sequences join the
decode loop (unless the prefill is chunked: below). Every iteration decodes one token of every running sequence
and costs ``decode(n, 1)`` for ``n`` running sequences; a sequence leaves once it has produced
its ``outputs`` tokens, and a batch ends when its last sequence leaves. So, between membership
changes, ``k`` iterations over ``n`` sequences cost ``round(decode(n, k) x f)`` (``f``: the
running sequences' mean scatter factor), and a batch alone on an idle engine, its sequences all
of one length, takes ``prefill + round(decode(n, out) x f)``: the static prediction.

Chunked prefill (``chunk_tokens`` > 0, the model's ``prefill_chunk_tokens``; "stall-free"
batching as in Sarathi-Serve and vLLM): while prompts wait to be prefilled, every iteration is
one mixed forward of at most ``chunk_tokens`` tokens: one decode token of every running sequence
first, then as many prompt tokens of the waiting batches as fit (first come first served; at
least one, so prompts always progress). It costs ``prefill(tokens in it)`` (a compute-bound
forward: its token count prices it) times the scatter factor of the batch whose prompt it
serves first. Running sequences thus keep decoding while a burst of prompts is prefilled,
instead of stalling for each whole prompt; a batch joins the decode loop (its first token) at
the end of the iteration that holds its last prompt token. Without waiting prompts, iterations
are plain decode iterations as above.

Completion times are computed event by event between membership changes (a prefill, a sequence
leaving, an arrival), never token by token (chunked iterations one by one, while prompts wait).
:class:`ContinuousEngine` is pure: integer microseconds on its own timeline (:mod:`sim.lanes`
maps it to the clock), no I/O, no randomness.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable
from dataclasses import dataclass

#: ``(running sequences, iterations) -> microseconds``, before scatter (``decode_us``-shaped).
DecodeCost = Callable[[int, int], int]
#: ``tokens -> microseconds`` of one forward over that many tokens, before scatter.
PrefillCost = Callable[[int], int]


@dataclass(frozen=True)
class Joiner:
    """One dispatched batch as the engine sees it."""

    batch_id: str
    arrive_us: int  # when it reaches the engine (its transfers done), engine timeline
    prefill_us: int  # its prefill iteration, scatter applied
    outputs: tuple[int, ...]  # tokens each of its sequences generates
    factor: float = 1.0  # its service-time scatter (median 1)
    prompt_tokens: int = 0  # prompt tokens to prefill (chunked engines; 0: one token)

    def __post_init__(self) -> None:
        if self.prefill_us < 0 or not self.outputs or min(self.outputs) < 0:
            raise ValueError(f"Joiner {self.batch_id}: prefill_us and outputs >= 0, outputs set")
        if self.prompt_tokens < 0:
            raise ValueError(f"Joiner {self.batch_id}: prompt_tokens >= 0")


@dataclass(frozen=True)
class Timing:
    """When a batch's prefill ends (its first token), when its last sequence ends, and how
    many sequences decoded together right after it joined (its own included)."""

    first_token_us: int
    end_us: int
    joined_with: int


class _Run:
    """A batch in the decode loop: remaining tokens per sequence, ascending."""

    __slots__ = ("batch_id", "rem", "factor", "first", "joined_with")

    def __init__(self, batch_id: str, rem: list[int], factor: float, first: int, n: int) -> None:
        self.batch_id = batch_id
        self.rem = rem
        self.factor = factor
        self.first = first  # its prefill's end
        self.joined_with = n

    def copy(self) -> _Run:
        return _Run(self.batch_id, list(self.rem), self.factor, self.first, self.joined_with)


class ContinuousEngine:
    """One replica's continuous decode loop. ``join`` admits a batch and answers the new
    completion times of every batch whose timing changed (the joiner's always)."""

    def __init__(
        self, decode: DecodeCost, prefill: PrefillCost | None = None, chunk_tokens: int = 0
    ) -> None:
        if chunk_tokens < 0 or (chunk_tokens and prefill is None):
            raise ValueError("chunk_tokens >= 0, and a chunked engine needs its prefill cost")
        self._decode = decode
        self._prefill = prefill
        self._chunk = chunk_tokens
        self._t = 0  # checkpoint: an iteration boundary (or an idle instant)
        self._running: list[_Run] = []
        self._pending: list[tuple[int, int, Joiner]] = []  # (arrive, order, joiner), sorted
        self._left: dict[str, int] = {}  # chunked: prompt tokens still to prefill, if begun
        self._order = 0
        self._timings: dict[str, Timing] = {}  # last answer for batches not ended by ``_t``

    def join(self, j: Joiner, now_us: int) -> dict[str, Timing]:
        """Admit ``j``, dispatched at ``now_us`` (not earlier than any earlier call's;
        ``j.arrive_us >= now_us``), and return the timings that changed: the joiner's, and
        those of the batches it delays."""
        if j.batch_id in self._timings:
            raise ValueError(f"batch {j.batch_id} already joined")
        if j.arrive_us < now_us:
            raise ValueError(f"batch {j.batch_id} arrives at {j.arrive_us} before {now_us}")
        # settle the iterations that end by now: no later dispatch reaches the engine before
        # its own dispatch, so nothing can change them (batches ended by then drop out). The
        # segment in progress is left whole, so a batch the joiner does not delay keeps its
        # timing to the microsecond.
        self._t, self._running, self._pending, _ = self._simulate(
            self._t, self._running, self._pending, self._left, settle_to=now_us
        )
        self._order += 1
        insort(self._pending, (j.arrive_us, self._order, j), key=lambda p: (p[0], p[1]))
        running = [r.copy() for r in self._running]
        *_, timings = self._simulate(
            self._t, running, list(self._pending), dict(self._left), settle_to=None
        )
        changed = {b: t for b, t in timings.items() if self._timings.get(b) != t}
        self._timings = timings
        return changed

    # ----- the event loop
    def _cost(self, n: int, k: int, f: float) -> int:
        return round(self._decode(n, k) * f) if f != 1.0 else self._decode(n, k)

    def _iterations_to(self, n: int, f: float, dt: int, most: int) -> int:
        """Fewest iterations (1..``most``) over ``n`` sequences lasting ``>= dt`` us; ``most``
        when even those fall short."""
        if self._cost(n, most, f) < dt:
            return most
        one = self._cost(n, 1, f)
        k = min(most, max(1, -(-dt // one) if one > 0 else most))  # exact when decode is linear
        while k > 1 and self._cost(n, k - 1, f) >= dt:
            k -= 1
        while k < most and self._cost(n, k, f) < dt:
            k += 1
        return k

    def _simulate(
        self,
        t: int,
        running: list[_Run],
        pending: list[tuple[int, int, Joiner]],
        left: dict[str, int],
        settle_to: int | None,
    ) -> tuple[int, list[_Run], list[tuple[int, int, Joiner]], dict[str, Timing]]:
        """Run the engine from ``t``, mutating ``running``, ``pending`` and ``left``: every
        prefill, chunk and decode segment that ends by ``settle_to``, or all of them when it is
        None. Returns the state reached and the timings of the batches that ended (and, at the
        end of a full run, none is left running)."""
        out: dict[str, Timing] = {}
        while True:
            if self._chunk and pending and pending[0][0] <= t:
                end = self._chunk_iteration(t, running, pending, left, settle_to, out)
                if end is None:
                    break
                t = end
                continue
            if pending and pending[0][0] <= t:
                j = pending[0][2]
                if settle_to is not None and t + j.prefill_us > settle_to:
                    break
                pending.pop(0)
                t += j.prefill_us
                _enter(j, t, running, out)
                continue
            if not running:
                if not pending or (settle_to is not None and pending[0][0] > settle_to):
                    break
                t = pending[0][0]  # idle until the next batch arrives
                continue
            end = self._decode_segment(t, running, pending, settle_to, out)
            if end is None:
                break
            t = end
        return t, running, pending, out

    def _decode_segment(
        self,
        t: int,
        running: list[_Run],
        pending: list[tuple[int, int, Joiner]],
        settle_to: int | None,
        out: dict[str, Timing],
    ) -> int | None:
        """Decode iterations from ``t`` (no arrived batch awaits its prefill): until the soonest sequence leaves,
        or until the first iteration boundary after the next arrival. Mutates ``running``
        (sequences that end leave it, their batches' timings go to ``out``) and returns the
        segment's end, or None (nothing changed) when it would end after ``settle_to``."""
        if len(running) == 1:
            r = running[0]
            n, k, f = len(r.rem), r.rem[0], r.factor
        else:  # one pass: sequences, the soonest to leave, their mean scatter
            n, k, weighted = 0, running[0].rem[0], 0.0
            for r in running:
                n += len(r.rem)
                weighted += len(r.rem) * r.factor
                k = min(k, r.rem[0])
            f = weighted / n
        if pending:  # the next arrival cuts the segment at the first boundary after it
            k = self._iterations_to(n, f, pending[0][0] - t, k)
        end = t + self._cost(n, k, f)
        if settle_to is not None and end > settle_to:
            return None
        still: list[_Run] = []
        for r in running:
            r.rem = [x - k for x in r.rem if x > k]
            if r.rem:
                still.append(r)
            else:
                out[r.batch_id] = Timing(r.first, end, r.joined_with)
        running[:] = still
        return end

    def _chunk_iteration(
        self,
        t: int,
        running: list[_Run],
        pending: list[tuple[int, int, Joiner]],
        left: dict[str, int],
        settle_to: int | None,
        out: dict[str, Timing],
    ) -> int | None:
        """One mixed iteration from ``t`` (prompts are waiting): decode tokens of the running
        sequences first, then prompt tokens of the arrived batches in order, within the chunk.
        Mutates the state and returns the iteration's end, or None (nothing changed) when it
        would end after ``settle_to``."""
        n = sum(len(r.rem) for r in running)
        room = max(1, self._chunk - n)
        taken: list[tuple[Joiner, int]] = []  # (batch, its prompt tokens in this iteration)
        for arrive, _, j in pending:
            if arrive > t or room <= 0:
                break
            todo = left.get(j.batch_id, max(1, j.prompt_tokens))
            take = min(todo, room)
            taken.append((j, take))
            room -= take
        tokens = n + sum(take for _, take in taken)
        assert self._prefill is not None  # checked at construction
        cost = self._prefill(tokens)
        f = taken[0][0].factor
        end = t + (round(cost * f) if f != 1.0 else cost)
        if settle_to is not None and end > settle_to:
            return None
        still: list[_Run] = []
        for r in running:  # one decode token each
            r.rem = [x - 1 for x in r.rem if x > 1]
            if r.rem:
                still.append(r)
            else:
                out[r.batch_id] = Timing(r.first, end, r.joined_with)
        running[:] = still
        for j, take in taken:
            todo = left.pop(j.batch_id, max(1, j.prompt_tokens)) - take
            if todo > 0:
                left[j.batch_id] = todo
                continue
            pending.pop(0)  # prompts are served in order: a finished one is the first
            _enter(j, end, running, out)
        return end


def _enter(j: Joiner, t: int, running: list[_Run], out: dict[str, Timing]) -> None:
    """``j``'s prefill ended at ``t`` (its first token): its sequences join ``running``, or it
    ends there when it has nothing to decode."""
    rem = sorted(o for o in j.outputs if o > 0)
    size = sum(len(r.rem) for r in running) + len(j.outputs)
    if rem:
        running.append(_Run(j.batch_id, rem, j.factor, t, size))
    else:  # nothing to decode: it ends with its prefill
        out[j.batch_id] = Timing(t, t, size)
