"""The continuous-batching engine model (``sim.continuous``): timings from its equations, and
the event-driven computation checked against a token-by-token reference."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.continuous import ContinuousEngine, Joiner, Timing
from sim.lanes import Lanes

FIXED, PER_SEQ = 700, 90  # decode: FIXED + PER_SEQ x n per iteration


def decode(n: int, k: int) -> int:
    return k * (FIXED + PER_SEQ * n)


def it(n: int) -> int:
    """One decode iteration over ``n`` running sequences."""
    return decode(n, 1)


def test_a_lone_batch_takes_prefill_then_decode_at_its_own_size() -> None:
    eng = ContinuousEngine(decode)
    got = eng.join(Joiner("a", 250, 5_000, (12, 12, 12)), 0)
    assert got == {"a": Timing(250 + 5_000, 250 + 5_000 + decode(3, 12), 3)}


def test_a_lone_batch_with_scatter_rounds_its_decode_once() -> None:
    eng = ContinuousEngine(decode)
    got = eng.join(Joiner("a", 0, 5_000, (7, 7), factor=1.37), 0)
    assert got["a"].end_us == 5_000 + round(decode(2, 7) * 1.37)


def test_shared_iterations_scatter_by_the_running_sequences_mean_factor() -> None:
    eng = ContinuousEngine(decode)
    eng.join(Joiner("a", 0, 1_000, (10, 10), factor=1.2), 0)
    got = eng.join(Joiner("b", 1_000, 500, (4,), factor=0.9), 1_000)  # at a's first boundary
    shared = round(decode(3, 4) * (2 * 1.2 + 0.9) / 3)
    assert got["b"].end_us == 1_000 + 500 + shared
    assert got["a"].end_us == 1_000 + 500 + shared + round(decode(2, 10 - 4) * 1.2)


def test_iteration_cost_drops_as_sequences_leave() -> None:
    eng = ContinuousEngine(decode)
    got = eng.join(Joiner("a", 0, 1_000, (2, 5, 9)), 0)["a"]
    assert got.end_us == 1_000 + 2 * it(3) + 3 * it(2) + 4 * it(1)
    assert got.end_us < 1_000 + decode(3, 9)  # the static prediction keeps every slot


def test_a_joiner_stalls_the_running_batch_for_its_prefill_and_then_decodes_with_it() -> None:
    eng = ContinuousEngine(decode)
    pa, pb = 4_000, 2_500
    eng.join(Joiner("a", 0, pa, (10, 10)), 0)
    # dispatched mid-way through a's 4th iteration: it waits for that iteration's end
    now = pa + 3 * it(2) + it(2) // 2
    got = eng.join(Joiner("b", now, pb, (4,)), now)
    b_first = pa + 4 * it(2) + pb
    b_end = b_first + 4 * it(3)
    a_end = b_end + 2 * it(2)  # a had 6 tokens left at b's prefill: 4 with b, 2 alone
    assert got == {"b": Timing(b_first, b_end, 3), "a": Timing(pa, a_end, 2)}
    # versus alone: a is late by b's prefill plus b's share of the 4 iterations they shared
    assert a_end - (pa + decode(2, 10)) == pb + 4 * (it(3) - it(2))


def test_transfer_time_is_spent_before_the_joiner_reaches_the_engine() -> None:
    eng = ContinuousEngine(decode)
    eng.join(Joiner("a", 0, 1_000, (50,)), 0)
    # dispatched during a's prefill, b reaches the engine just before a's 3rd token: a keeps
    # decoding meanwhile and b prefills at the next boundary
    got = eng.join(Joiner("b", 1_000 + 3 * it(1) - 1, 500, (1,)), 100)
    assert got["b"].first_token_us == 1_000 + 3 * it(1) + 500


def test_a_batch_the_joiner_does_not_delay_keeps_its_timing_and_is_not_returned() -> None:
    eng = ContinuousEngine(decode)
    eng.join(Joiner("a", 0, 1_000, (3,)), 0)
    a_end = eng.join(Joiner("c", 0, 1_000, (30,)), 0)["a"].end_us  # c's prefill delays a
    got = eng.join(Joiner("b", a_end + 1, 700, (2,)), a_end + 1)
    assert "a" not in got and set(got) == {"b", "c"}


def test_joiners_waiting_for_one_boundary_prefill_in_arrival_order() -> None:
    eng = ContinuousEngine(decode)
    eng.join(Joiner("a", 0, 1_000, (20,)), 0)
    t = 1_000 + it(1) // 3
    late = eng.join(Joiner("late", t + 40, 300, (1,)), t)  # long transfer: arrives second
    early = eng.join(Joiner("early", t + 10, 200, (1,)), t + 5)
    boundary = 1_000 + it(1)
    assert early["early"].first_token_us == boundary + 200
    assert early["late"].first_token_us == boundary + 200 + 300
    assert late["late"].first_token_us == boundary + 300  # before "early" was known


def test_a_batch_with_nothing_to_generate_ends_with_its_prefill() -> None:
    eng = ContinuousEngine(decode)
    assert eng.join(Joiner("a", 0, 800, (0, 0)), 0) == {"a": Timing(800, 800, 2)}


def test_refuses_a_batch_arriving_before_its_dispatch_or_joining_twice() -> None:
    eng = ContinuousEngine(decode)
    with pytest.raises(ValueError, match="before"):
        eng.join(Joiner("a", 5, 1, (1,)), 10)
    eng.join(Joiner("a", 0, 1, (100,)), 0)
    with pytest.raises(ValueError, match="already"):
        eng.join(Joiner("a", 0, 1, (1,)), 0)


def test_lanes_time_a_batch_on_an_idle_replica_from_its_own_dispatch() -> None:
    lanes = Lanes()
    got = lanes.join("r", ("d0",), 12.5, decode, Joiner("a", 300, 1_000, (4,)), "A")
    assert [(x.payload, x.dispatch_us, x.end_s) for x in got] == [
        ("A", 0, 12.5 + (300 + 1_000 + decode(1, 4)) / 1e6)
    ]
    assert lanes.release("r", "a") == got[0]  # its final timing
    assert len(lanes) == 0
    again = lanes.join("r", ("d0",), 20.0, decode, Joiner("b", 0, 1_000, (4,)), "B")
    assert again[0].end_s == 20.0 + (1_000 + decode(1, 4)) / 1e6  # a fresh timeline


def test_lanes_put_the_joiner_first_and_drop_a_failed_devices_loops() -> None:
    lanes = Lanes()
    lanes.join("r", ("d0", "d1"), 0.0, decode, Joiner("a", 0, 1_000, (40,)), "A")
    got = lanes.join("r", ("d0", "d1"), 0.01, decode, Joiner("b", 0, 1_000, (4,)), "B")
    assert [(x.batch_id, x.payload) for x in got] == [("b", "B"), ("a", "A")]
    assert got[0].dispatch_us == 10_000
    assert lanes.release("r", "a") == got[1]  # the latest timing, not the first one
    lanes.device_down("d1")
    assert len(lanes) == 0


# ----- the event-driven engine against a token-by-token reference


def reference(joins: list[tuple[int, Joiner]]) -> dict[str, Timing]:
    """One iteration at a time, every batch known in advance (factor 1)."""
    pending = sorted(((j.arrive_us, i, j) for i, (_, j) in enumerate(joins)), key=lambda p: p[:2])
    seqs: list[list] = []  # [batch id, tokens left]
    first: dict[str, int] = {}
    size: dict[str, int] = {}
    out: dict[str, Timing] = {}
    t = 0
    while pending or seqs:
        if pending and pending[0][0] <= t:
            j = pending.pop(0)[2]
            t += j.prefill_us
            first[j.batch_id], size[j.batch_id] = t, len(seqs) + len(j.outputs)
            seqs += [[j.batch_id, o] for o in j.outputs if o > 0]
            if not any(s[0] == j.batch_id for s in seqs):
                out[j.batch_id] = Timing(t, t, size[j.batch_id])
        elif seqs:
            t += it(len(seqs))
            for s in seqs:
                s[1] -= 1
            for b in {s[0] for s in seqs if s[1] == 0}:
                seqs = [s for s in seqs if s[0] != b or s[1] > 0]
                if not any(s[0] == b for s in seqs):
                    out[b] = Timing(first[b], t, size[b])
        else:
            t = pending[0][0]
    return out


batches = st.lists(
    st.tuples(
        st.integers(0, 40_000),  # gap since the previous dispatch
        st.integers(0, 6_000),  # transfer
        st.integers(0, 9_000),  # prefill
        st.lists(st.integers(0, 25), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=7,
)


@settings(max_examples=150, deadline=None)
@given(batches)
def test_event_driven_timings_equal_the_token_by_token_reference(spec) -> None:
    joins, now = [], 0
    for i, (gap, move, prefill, outs) in enumerate(spec):
        now += gap
        joins.append((now, Joiner(f"b{i}", now + move, prefill, tuple(outs))))
    eng = ContinuousEngine(decode)
    latest: dict[str, Timing] = {}
    for now, j in joins:
        got = eng.join(j, now)
        assert j.batch_id in got
        latest.update(got)
    assert latest == reference(joins)


def test_same_joins_same_timings() -> None:
    def play() -> list[dict[str, Timing]]:
        eng = ContinuousEngine(decode)
        return [
            eng.join(Joiner(f"b{i}", 1_000 * i + 50, 2_000 + i, (5 + i, 9), 1 + i / 10), 1_000 * i)
            for i in range(6)
        ]

    assert play() == play()
