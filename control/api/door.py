"""The door: admission by capacity on the gateway's own path, before anything expensive.

The core predicts the queue delay of the models a run needs; what it cannot see is the
gateway's own path (HTTP, auth, recording, settling, commits, all on one event loop), which
under overload is where admitted calls ran out of time. The door measures that path by
Little's law: how many calls are on it now (``in_flight``, from admission to the answer) and
how often it answers one while busy (``per_request_s``, an exponentially weighted mean of the
gaps between answers); and of which priority class each held call is: with the headroom set, a
class below the most urgent is refused while a call of the most urgent one is on the path. The
decision is the core's (:func:`control.core.capacity.path_refusal`);
a refused call has cost an auth lookup and a body parse, nothing of the run log or the core.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from control.clock import SYSTEM_CLOCK, Clock
from control.core.capacity import CapacityAdmissionConfig, CapacityRefusal, path_refusal
from control.core.tenancy.base import priority_rank

#: Weight of the newest gap between answers in the mean.
ALPHA = 0.1
#: A gap longer than this is an idle spell, not service time: it is not counted.
IDLE_GAP_S = 1.0


@dataclass
class Door:
    """Counts the calls on the gateway's path (held from admission until answered, by run id)
    and the pace it answers them at."""

    config: CapacityAdmissionConfig
    clock: Clock = SYSTEM_CLOCK
    per_request_s: float = 0.0
    refused: int = 0
    _held: dict[str, int] = field(default_factory=dict)  # run id -> its class's rank
    _ranks: dict[int, int] = field(default_factory=dict)  # rank -> calls of it held
    _last_answer: float | None = None

    @property
    def in_flight(self) -> int:
        return len(self._held)

    def check(self, priority_class: str, left_s: float | None) -> CapacityRefusal | None:
        """The refusal of a new call of ``priority_class`` whose caller waits ``left_s``, or
        None to admit it."""
        urgent = self._ranks.get(0, 0)  # calls of the most urgent class held (rank 0)
        refusal = path_refusal(self.config, len(self._held), self.per_request_s,
                               priority_class, left_s, urgent)  # fmt: skip
        if refusal is not None:
            self.refused += 1
        return refusal

    def hold(self, run_id: str, priority_class: str = "standard") -> None:
        """An admitted call of ``priority_class`` now waits for its run ``run_id`` (then
        :meth:`leave`); a second hold of a run held is a no-op."""
        if run_id in self._held:
            return
        if not self._held:
            self._last_answer = self.clock.monotonic()  # a busy spell starts
        rank = priority_rank(priority_class)
        self._held[run_id] = rank
        self._ranks[rank] = self._ranks.get(rank, 0) + 1

    def leave(self, run_id: str) -> None:
        """The call waiting for ``run_id`` was answered (or failed); no-op if not held."""
        rank = self._held.pop(run_id, None)
        if rank is None:
            return
        self._ranks[rank] -= 1
        now = self.clock.monotonic()
        if self._last_answer is not None and now - self._last_answer < IDLE_GAP_S:
            self.per_request_s += ALPHA * (now - self._last_answer - self.per_request_s)
        self._last_answer = now if self._held else None
