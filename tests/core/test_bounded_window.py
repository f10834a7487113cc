"""``RecentKeys`` (issue 22, bounded memory): a window full of keys is compact (digests in
sorted arrays, not strings with their times), holds no more than its cap whatever the rate,
still answers "seen" for every key inside the horizon and forgets each one past it."""

from __future__ import annotations

import random
import tracemalloc

from control.core.parts import Inbox
from control.core.window import RecentKeys, digest


def _bytes_per_key(window: RecentKeys, keys: int, rate: float) -> float:
    """Bytes the window holds per key once ``keys`` keys were added at ``rate`` a second (key
    strings made outside the measure, as the callers' are)."""
    names = [f"tenant-{i % 7}/req-{i:012d}-0123456789abcdef" for i in range(keys)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i, name in enumerate(names):
            window.add(name, i / rate)
        return (tracemalloc.get_traced_memory()[0] - before) / keys
    finally:
        tracemalloc.stop()


def test_a_full_window_costs_tens_of_bytes_a_key_not_hundreds():
    window = RecentKeys(900.0)
    per_key = _bytes_per_key(window, 60_000, rate=60.0)  # 1000 s at 60 keys/s: a full window
    assert len(window) >= 54_000  # the window is full (900 s and up to one span)
    assert per_key < 40, f"{per_key:.0f} bytes a key"


def test_the_cores_request_id_window_is_compact():
    seen = Inbox().seen_requests
    per_key = _bytes_per_key(seen, 60_000, rate=100.0)  # 600 s: all inside the window
    assert len(seen) == 60_000 and per_key < 40, f"{per_key:.0f} bytes a key"


def test_every_key_inside_the_horizon_is_seen_and_every_key_past_a_span_more_is_not():
    rng = random.Random(7)
    window = RecentKeys(100.0)
    added: list[tuple[float, str]] = []
    now = 0.0
    for i in range(5000):
        now += rng.expovariate(20.0)
        key = f"k{i}"
        window.add(key, now)
        added.append((now, key))
        if i % 97 == 0:
            for at, old in added:
                age = now - at
                if age <= 100.0:
                    assert old in window, (old, age)
                elif age > 100.0 + window.span:
                    assert old not in window, (old, age)
    assert len(window) <= 20.0 * (100.0 + window.span) * 1.3


def test_the_cap_holds_under_a_flood_and_counts_what_it_dropped():
    window = RecentKeys(900.0, cap=1000)
    for i in range(20_000):  # 20,000 keys in 20 s: far more than the cap inside the horizon
        window.add(f"k{i}", i / 1000.0)
        assert len(window) <= 2000  # the sealed keys under the cap, the open span under it too
    assert window.evicted >= 18_000
    assert "k19999" in window and "k0" not in window  # the newest kept, the oldest dropped


def test_a_held_owner_keeps_its_keys_until_a_horizon_after_it_is_released():
    held = {"run-1"}
    window = RecentKeys(10.0, keep=held.__contains__)
    window.add("step-a", 0.0, owner="run-1")
    for t in range(1, 100):
        window.add(f"other-{t}", float(t), owner=f"ended-{t}")
    assert "step-a" in window and "other-1" not in window
    held.clear()
    window.add("tick", 100.0)
    assert "step-a" in window  # released now: remembered for a horizon from here
    window.add("tock", 111.0)
    assert "step-a" not in window


def test_a_re_added_key_is_remembered_from_its_last_add():
    window = RecentKeys(10.0)
    window.add("k", 0.0)
    window.add("k", 8.0)
    window.add("x", 15.0)
    assert "k" in window
    window.add("y", 30.0)
    assert "k" not in window


def test_digests_are_stable_and_take_any_text():
    assert digest("q1") == digest("q1") != digest("q2")
    assert digest("bad \udc80 text") != digest("bad  text")  # a lone surrogate is not an error
    assert 0 <= digest("q1") < 2**64
    assert "q1" not in RecentKeys(1.0) and 1 not in RecentKeys(1.0)
