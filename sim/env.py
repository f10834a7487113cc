"""A SimPy environment that schedules callbacks at absolute times.

The twin must step the core at exactly the instants the plain replay driver would: a wake-up the
core asks for at ``t`` must fire at ``t``, not at ``now + (t - now)``, which can differ in the
last bit of a float and make the core see its timer as not yet due. SimPy only offers relative
delays, so this subclass adds :meth:`TwinEnvironment.call_at`, which pushes onto SimPy's own
event queue with the absolute time (the same tuple layout ``Environment.schedule`` uses).
"""

from __future__ import annotations

from collections.abc import Callable
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
