"""A SimPy environment that schedules callbacks at absolute times.

The twin must step the core at exactly the instants the plain replay driver would: a wake-up the
core asks for at ``t`` must fire at ``t``, not at ``now + (t - now)``, which can differ in the
last bit of a float and make the core see its timer as not yet due. SimPy only offers relative
delays, so this subclass adds :meth:`TwinEnvironment.call_at`, which pushes onto SimPy's own
event queue with the absolute time (the same tuple layout ``Environment.schedule`` uses).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from heapq import heappush

import simpy
from simpy.events import NORMAL, URGENT, Event

#: Priority of recorded inputs (arrivals, completions, loads, wake-ups) at an instant.
RECORD = URGENT
#: Priority of the one ``step`` of an instant: after every input of that instant.
STEP = NORMAL
#: Priority of observers (samplers): after the step of the same instant.
OBSERVE = 2


class TwinEnvironment(simpy.Environment):
    """``simpy.Environment`` plus absolute-time callbacks."""

    def call_at(
        self, when: float, callback: Callable[[Event], None], priority: int = RECORD
    ) -> Event:
        """Run ``callback(event)`` at time ``when`` (>= now); events with equal time and
        priority run in scheduling order. Returns the (already triggered) event."""
        if when < self._now:
            raise ValueError(f"call_at(when={when}): earlier than now={self._now}")
        ev = Event(self)
        ev._ok = True  # a triggered event, like a Timeout; SimPy reads these two fields
        ev._value = None
        ev.callbacks.append(callback)
        heappush(self._queue, (when, priority, next(self._eid), ev))
        return ev


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
