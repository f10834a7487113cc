"""Status deadlines: an actor that stops answering its status call is judged lost.

Ray reports an actor that dies with its process (a signal, ``ray.kill``, an OOM kill) at once:
the references of its calls fail with ``RayActorError`` (:mod:`.flow`). A node killed outright
is slower: Ray first reports its actors merely unavailable, after retries of its own (1.3-2.7 s
measured here), and the node table shows the node dead only after the GCS health check
(12-15 s here with Ray's defaults). Two checks of the executor's own close the gap:

* an actor whose raylet died lives on, orphaned, until Ray's own check of its parent ends it
  (it answered 350-450 ms after its node was killed here): its status call raises
  (:class:`~control.executor.ray.actor.NodeLost`), so the node's loss is seen at the next
  heartbeat;
* a deadline on the status call (the heartbeat, one every ``heartbeat_s``), for a machine that
  answers nothing at all (frozen, cut off by the network): an actor that is up and whose last
  status answer is older than its limit, ``missed_heartbeats x heartbeat_s``, is judged lost
  (:meth:`StatusDeadlines.judge`, ``Flow.kill``): it is killed (``ray.kill``: an actor merely stalled cannot answer
  later; the slot's generation bump ignores its late replies anyway), its slot reports
  ``WorkerDown`` (items in flight retriable once, as for any lost actor) and a fresh actor is
  started unless its node left. Silence is judged on two checks in a row, an eighth of a
  heartbeat apart: the pump handles every reply queued before a check before the next one, so
  an answer that had arrived but waited behind a late pump thread is never taken for silence.
  The actor is judged lost at most ``missed_heartbeats x heartbeat_s`` plus a quarter of a
  heartbeat after its last answer.

False positives guarded against, measured against 0.4-s heartbeats on two loaded cores: an
actor running long MiniLM batches, or beside another converting SmolLM2, went at most 0.43 s
without an answer (the interval itself is 0.4 s): two heartbeats leave one of slack. An actor
LOADING a model went up to 0.84 s (converting SmolLM2) and 0.60 s (its first MiniLM load):
loading holds the interpreter in long stretches that starve its status thread, so while a load
runs on it its limit is ``load_silence_s`` (as the local executor's). A crash while loading is
still seen at once (``RayActorError``), a node loss at its next answer (``NodeLost``) or when
Ray reports the actor unavailable.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from control.executor.ray.config import RayExecutorConfig
from control.executor.ray.flow import Flow
from control.executor.ray.slots import Slot

#: deadline checks per heartbeat: silence is judged within a quarter of a heartbeat of its
#: limit (a check to find it, the next to confirm it)
CHECKS_PER_BEAT = 8


@dataclass
class StatusDeadlines:
    """When heartbeats are due, and which up actors have been silent past their limit."""

    heartbeat_s: float
    missed_heartbeats: int
    load_silence_s: float
    next_beat: float = 0.0
    #: device ids found silent at the previous check (judged when still silent at this one)
    suspects: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, config: RayExecutorConfig) -> StatusDeadlines:
        return cls(config.heartbeat_s, config.missed_heartbeats, config.load_silence_s)

    @property
    def check_s(self) -> float:
        """The interval of the checks (the pump's tick)."""
        return self.heartbeat_s / CHECKS_PER_BEAT

    def beat_due(self, now: float) -> bool:
        """Whether the heartbeat's work (status calls, the node table) is due at ``now``."""
        if now < self.next_beat:
            return False
        self.next_beat = now + self.heartbeat_s - self.check_s / 2  # due at the nearest check
        return True

    def limit_s(self, loading: bool) -> float:
        limit = self.missed_heartbeats * self.heartbeat_s
        return max(limit, self.load_silence_s) if loading else limit

    def silent(self, slots: Iterable[Slot], now: float,
               loading: Collection[str]) -> list[tuple[Slot, str]]:  # fmt: skip
        """The up actors silent past their limit at this check and the previous one, each
        with why; ``loading``: the device ids with a load in flight."""
        found: list[tuple[Slot, str]] = []
        suspects: set[str] = set()
        for slot in slots:
            if not slot.up or slot.gone or not slot.last_seen:
                continue  # starting (its first answer has its own wait) or gone
            quiet, limit = now - slot.last_seen, self.limit_s(slot.device_id in loading)
            if quiet <= limit:
                continue
            suspects.add(slot.device_id)
            if slot.device_id in self.suspects:
                found.append((slot, f"no status answer for {quiet:.2f}s (limit {limit:.2f}s)"))
        self.suspects = suspects
        return found

    def judge(self, flow: Flow, now: float, loading: Collection[str]) -> None:
        """Kill and report lost (``Flow.kill``) the actors of ``flow`` that :meth:`silent`
        finds."""
        for slot, why in self.silent(flow.slots.values(), now, loading):
            flow.kill(slot, why)
