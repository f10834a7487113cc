"""The status deadline's bookkeeping (no cluster): an up actor silent past its limit at two
checks in a row is judged, one that answered in between is not, a load stretches the limit,
and an actor still starting or gone is never judged."""

from __future__ import annotations

import pytest

from control.executor.protocol import DeviceInfo
from control.executor.ray.cluster import Placement
from control.executor.ray.config import RayExecutorConfig
from control.executor.ray.silence import StatusDeadlines
from control.executor.ray.slots import Slot

pytestmark = pytest.mark.ray


def _slot(name: str, last_seen: float, up: bool = True) -> Slot:
    slot = Slot(DeviceInfo(name, "cpu", 0, 512), Placement("n", 1.0, 0.0), up=up)
    slot.last_seen = last_seen
    return slot


def test_silence_past_the_limit_at_two_checks_in_a_row_is_judged():
    d = StatusDeadlines.of(RayExecutorConfig(heartbeat_s=0.4))  # limit 0.8 s
    quiet, talks = _slot("a", 10.0), _slot("b", 10.0)
    assert d.silent([quiet, talks], 10.75, ()) == []  # within the limit
    assert d.silent([quiet, talks], 10.85, ()) == []  # past it: suspect, confirmed next check
    talks.last_seen = 10.86  # its answer had waited behind the check
    (judged,) = d.silent([quiet, talks], 10.9, ())
    assert judged[0] is quiet and "no status answer for 0.90s (limit 0.80s)" in judged[1]


def test_a_load_stretches_the_limit_and_starting_or_gone_actors_are_not_judged():
    d = StatusDeadlines.of(RayExecutorConfig(heartbeat_s=0.4, load_silence_s=10.0))
    loading, starting, gone = _slot("l", 10.0), _slot("s", 0.0, up=False), _slot("g", 10.0)
    gone.gone = True
    for now in (12.0, 12.1, 19.9):
        assert d.silent([loading, starting, gone], now, {"l"}) == []
    d.silent([loading], 20.1, {"l"})
    assert [s for s, _ in d.silent([loading], 20.2, {"l"})] == [loading]


def test_heartbeats_are_due_once_per_interval_at_the_nearest_check():
    d = StatusDeadlines.of(RayExecutorConfig(heartbeat_s=0.4))
    ticks = [round(i * d.check_s, 3) for i in range(17)]  # two heartbeats of checks
    assert [t for t in ticks if d.beat_due(t)] == [0.0, 0.4, 0.8]


def test_fewer_than_two_missed_heartbeats_are_refused():
    with pytest.raises(ValueError, match="missed_heartbeats >= 2"):
        RayExecutorConfig(missed_heartbeats=1)
