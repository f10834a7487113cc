"""A SimPy environment that runs the twin's instants at exact absolute times, public API only.

The twin must step the core at exactly the instants the plain replay driver would: a wake-up the
core asks for at ``t`` must fire at ``t``, not at ``now + (t - now)``, which can differ in the
last bit of a float and make the core see its timer as not yet due. SimPy schedules at
``now + delay``, so :meth:`TwinEnvironment.call_at` picks a delay whose float sum with ``now``
is ``t`` (:func:`exact_delay`), or, where no float delay has that sum, reaches ``t`` in two hops.

Everything due at one time is one *instant*: one SimPy ``Timeout`` (the only event the twin
queues), whose processing runs that time's callbacks in three phases:

1. inputs (``call_at``: the driver's arrivals, completions, loads, wake-ups), in scheduling
   order, including those scheduled for this very time while the instant runs;
2. the environment's ``settle(now)`` hook (the driver's one core step of the instant), right
   after the last input; inputs it schedules for ``now`` run next, then ``settle`` again;
3. observers (``observe_at``: samplers), in scheduling order.

This is the order SimPy's own priorities would give (inputs at a priority before the step's,
observers after), with one queued event per instant instead of one per input plus one per step.
Every callback is called with the instant's time. The environment is driven with ``step()`` and
``peek()`` as any SimPy environment; other SimPy events can share it, and a failed one raises
from ``step()`` as SimPy makes it.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import simpy
from simpy.events import Event, Timeout

#: A callback of an instant: called with the instant's time.
Callback = Callable[[float], object]


def exact_delay(now: float, when: float) -> float | None:
    """A float ``d >= 0`` with ``now + d == when`` in float arithmetic (what SimPy's
    ``schedule`` computes), or None where no float has that sum. Needs ``0 <= now <= when``.

    ``when - now`` is exact (so is its sum) when ``now >= when / 2`` (Sterbenz's lemma), and
    otherwise within half an ulp of ``when`` of the real difference, so a solution, if any, is
    within a few floats of it. Terminates: ``fl(now + d)`` never decreases as ``d`` grows
    (rounding is monotone), the walk goes one way only (up while the sum falls short, down while
    it overshoots) and stops as soon as the sum reaches or passes ``when``, which it does by
    ``d = when`` going up (``now + when >= when``) and by ``d = 0`` going down (``now <= when``).
    Passing without reaching means no float works (e.g. ``now = 2**-53``, ``when = 1 + 2**-52``:
    the two candidate sums are ties that round to even neighbours of ``when``)."""
    delay = when - now
    reached = now + delay
    if reached == when:
        return delay
    up = reached < when
    toward = math.inf if up else -math.inf
    while True:
        delay = math.nextafter(delay, toward)
        reached = now + delay
        if reached == when:
            return delay
        if (reached > when) == up:
            return None  # crossed ``when`` without landing on it


#: The callbacks due at one time: ``(when, inputs, observers)``, each list in scheduling order
#: (a tuple, not a class: one is made per instant, on the twin's hot path).
_Instant = tuple[float, list[Callback], list[Callback]]


def _nothing(_now: float) -> None:
    return None


class TwinEnvironment(simpy.Environment):
    """``simpy.Environment`` plus absolute-time callbacks grouped by instant (module docstring).

    ``settle(now)`` runs after the inputs of each instant (the driver steps its core there; it
    may schedule more inputs for ``now``, which run before ``settle`` is called again).
    ``callbacks_run`` counts the callbacks run so far (inputs and observers)."""

    def __init__(self, settle: Callback = _nothing) -> None:
        super().__init__()
        self.settle = settle
        self.callbacks_run = 0
        self._instants: dict[float, _Instant] = {}
        self._observers_left = 0

    def call_at(self, when: float, callback: Callback) -> None:
        """Run the input ``callback(when)`` at time ``when`` (>= now), after the inputs of that
        instant scheduled before it and before its ``settle``."""
        instant = self._instants.get(when)
        if instant is None:  # ``_open``, inlined: this runs once per instant of a replay
            instant = self._instants[when] = (when, [callback], [])
            now = self.now
            delay = when - now
            if delay >= 0 and now + delay == when:  # nearly always (NaN fails both)
                Timeout(self, delay).callbacks.append(partial(self._run, instant))
            else:
                self._schedule_exactly(instant)
        else:
            instant[1].append(callback)

    def observe_at(self, when: float, callback: Callback) -> None:
        """Run the observer ``callback(when)`` at time ``when`` (>= now), after the instant's
        last ``settle`` and the observers of that instant scheduled before it."""
        instant = self._instants.get(when)
        if instant is None:
            instant = self._open(when)
        instant[2].append(callback)

    def scheduled(self) -> bool:
        """Whether anything is still to run besides the callback now running: another instant,
        an observer of this instant after the one now running, or another SimPy event."""
        return len(self._instants) > 1 or self._observers_left > 0 or self.peek() < math.inf

    def _open(self, when: float) -> _Instant:
        """A new instant at ``when`` (registered, and queued at exactly that time)."""
        instant = self._instants[when] = (when, [], [])
        self._schedule_exactly(instant)
        return instant

    def _schedule_exactly(self, instant: _Instant) -> None:
        """Queue ``instant`` at exactly its time: one ``Timeout``, or where no float delay has
        the sum ``when`` (then ``now < when / 2``), a hop to ``now + when / 2`` (in
        ``[when / 2, when)``, where ``when - now`` is exact) and a second ``Timeout`` from
        there. Refuses (and forgets) an instant earlier than now."""
        when, now = instant[0], self.now
        if not when >= now:  # also refuses NaN
            del self._instants[when]
            raise ValueError(f"call_at(when={when}): earlier than now={now}")
        delay = exact_delay(now, when)
        if delay is None:
            Timeout(self, when / 2).callbacks.append(partial(self._hop, instant))
        else:
            Timeout(self, delay).callbacks.append(partial(self._run, instant))

    def _hop(self, instant: _Instant, _event: Event) -> None:
        self._schedule_exactly(instant)

    def _run(self, instant: _Instant, _event: Event) -> None:
        """Run one instant's phases (module docstring); the instant stays open (``call_at``
        for its time joins it) until its last observer has run."""
        now, inputs, observers = instant
        settle = self.settle
        ran = observed = 0
        try:
            while True:
                while ran < len(inputs):  # an input scheduled for now while this runs runs too
                    inputs[ran](now)
                    ran += 1
                settle(now)
                if ran == len(inputs):
                    break
            for observe in observers:
                self._observers_left = len(observers) - observed - 1
                observe(now)
                observed += 1
        finally:  # what ran is counted even when a callback ends the run by raising
            self._observers_left = 0
            self.callbacks_run += ran + observed
        del self._instants[now]


@contextmanager
def tuned_gc(gen0_threshold: int = 50_000, *, collect_first: bool = False) -> Iterator[None]:
    """Garbage-collector settings for one long replay, restored on exit.

    Everything alive on entry (scenario, core, placement, arrivals) is frozen out of the
    collector's generations (``gc.freeze``: constant time), and young collections run every
    ``gen0_threshold`` allocations instead of CPython's 700: a replay allocates many
    short-lived objects and keeps a few (runs, steps) for a while, so rescanning the static
    world on every full collection is wasted work. ``collect_first`` collects before freezing
    (a benchmark's clean start; costs a full collection). Process-wide: the twin runs in its
    own process (what-if and fidelity workers, the CLI), never in a server's worker thread.
    Not reentrant: the inner exit would unfreeze what the outer entry froze."""
    if collect_first:
        gc.collect()
    gc.freeze()
    old = gc.get_threshold()
    gc.set_threshold(gen0_threshold, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()
