"""The twin's SimPy environment: exact absolute times and the order of an instant's phases.

``exact_delay`` must find the float delay whose sum with ``now`` is the asked-for time whenever
one exists, say so when none does (the environment then hops), and always terminate; the
environment must fire every callback at exactly its time, run an instant's inputs, its
``settle`` and its observers in that order, and let a failed SimPy event raise from
``env.step()`` as SimPy makes it.
"""

from __future__ import annotations

import math
import random

import pytest

from sim.env import TwinEnvironment, exact_delay

#: (now, when) pairs where ``when - now`` rounds, or where no float delay works at all.
ADVERSARIAL = [
    (0.0, 0.1),
    (0.1, 0.3),
    (2.0**-53, 1.0 + 2.0**-52),  # no float delay: both candidate sums are ties rounding away
    (3 * 2.0**-53, 1.5 + 2.0**-52),
    (1e-300, 1.0),
    (0.7, 1e16 + 2.0),
    (1.0 / 3.0, 2.0 / 3.0),
    (5e-324, 1e-300),
    (123.456, 123.456),
    (1e-3, 3600.0 + 1e-9),
]


def _no_delay_cases(rng: random.Random, n: int) -> list[tuple[float, float]]:
    """Pairs with no exact float delay: ``when`` in [1.5, 2) with an odd last bit and ``now``
    an odd multiple of half its ulp, so every ``now + d`` near ``when`` is a tie."""
    cases = []
    for _ in range(n):
        when = 1.5 + rng.randrange(2**50) * 2.0**-52
        if not math.ulp(when) == 2.0**-52 or int(when * 2**52) % 2 == 0:
            when = math.nextafter(when, math.inf)
        cases.append(((2 * rng.randrange(2**20) + 1) * 2.0**-53, when))
    return cases


def _random_cases(rng: random.Random, n: int) -> list[tuple[float, float]]:
    cases = []
    for _ in range(n):
        when = rng.random() * 10.0 ** rng.randint(-6, 12)
        now = when * rng.choice((rng.random(), rng.random() ** 8, 1.0, 0.5, 0.0))
        cases.append((min(now, when), when))
    return cases


def _works(now: float, d: float, when: float) -> bool:
    return d >= 0 and now + d == when


def _near(d: float, steps: int) -> list[float]:
    """``d`` and the ``steps`` floats on either side of it."""
    out, lo, hi = [d], d, d
    for _ in range(steps):
        lo, hi = math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf)
        out += [lo, hi]
    return out


def test_exact_delay_finds_the_delay_or_proves_there_is_none() -> None:
    rng = random.Random(21)
    cases = ADVERSARIAL + _no_delay_cases(rng, 2_000) + _random_cases(rng, 20_000)
    nones = 0
    for now, when in cases:
        d = exact_delay(now, when)
        if d is not None:
            assert _works(now, d, when), (now, when, d)
            continue
        nones += 1
        assert now < when / 2, (now, when)  # Sterbenz: from when / 2 on the difference is exact
        # a delay, if any, would lie within a few floats of the rounded difference
        assert not any(_works(now, x, when) for x in _near(when - now, 16)), (now, when)
    assert nones >= 2_000  # the constructed cases have no delay, and were each recognized


def test_exact_delay_is_the_plain_difference_when_that_is_exact() -> None:
    assert exact_delay(0.0, 2.5) == 2.5
    assert exact_delay(1.0, 1.75) == 0.75
    assert exact_delay(4.0, 4.0) == 0.0


def _fire_at(pairs: list[tuple[float, float]]) -> list[tuple[float, float, float]]:
    """Schedule ``now`` from time 0, and from there ``when``: (asked, seen, callback arg)."""
    env = TwinEnvironment()
    seen: list[tuple[float, float, float]] = []

    def then(when: float):  # noqa: ANN202
        def fire(t: float) -> None:
            seen.append((when, env.now, t))

        return fire

    for now, when in pairs:

        def first(t: float, now: float = now, when: float = when) -> None:
            seen.append((now, env.now, t))
            env.call_at(when, then(when))

        env.call_at(now, first)
    while env.peek() < math.inf:
        env.step()
    return seen


@pytest.mark.parametrize(("now", "when"), ADVERSARIAL)
def test_a_callback_fires_at_exactly_the_time_asked_for(now: float, when: float) -> None:
    assert _fire_at([(now, when)]) == [(now, now, now), (when, when, when)]


def test_instants_without_a_float_delay_are_reached_by_a_hop_in_order() -> None:
    rng = random.Random(8)
    pairs = _no_delay_cases(rng, 50) + _random_cases(rng, 200)
    seen = _fire_at(pairs)
    assert all(asked == now == arg for asked, now, arg in seen)
    assert [s[1] for s in seen] == sorted(s[1] for s in seen)  # SimPy's clock never goes back
    assert len(seen) == 2 * len(pairs)


def test_an_instant_runs_inputs_then_settle_then_observers() -> None:
    calls: list[str] = []
    env: TwinEnvironment

    def settle(now: float) -> None:
        calls.append(f"settle@{now}")
        if calls.count(f"settle@{now}") == 1 and now == 1.0:
            env.call_at(1.0, lambda _t: calls.append("d"))  # the step's own input, same instant

    def a(_t: float) -> None:
        calls.append("a")
        env.call_at(1.0, lambda _t: calls.append("c"))  # an input's own input, same instant

    env = TwinEnvironment(settle=settle)
    env.observe_at(1.0, lambda _t: calls.append("o1"))  # scheduled first, runs last
    env.call_at(1.0, a)
    env.call_at(1.0, lambda _t: calls.append("b"))
    env.observe_at(1.0, lambda _t: calls.append("o2"))
    env.call_at(0.5, lambda _t: calls.append("early"))
    env.call_at(2.0, lambda _t: calls.append("late"))
    while env.peek() < math.inf:
        env.step()
    assert calls == [
        "early", "settle@0.5",
        "a", "b", "c", "settle@1.0", "d", "settle@1.0", "o1", "o2",
        "late", "settle@2.0",
    ]  # fmt: skip
    assert env.callbacks_run == 8  # inputs and observers; the settles are not callbacks


def test_scheduled_sees_later_instants_and_the_observers_left() -> None:
    env = TwinEnvironment()
    seen: list[bool] = []
    env.observe_at(1.0, lambda _t: seen.append(env.scheduled()))
    env.observe_at(1.0, lambda _t: seen.append(env.scheduled()))
    env.call_at(2.0, lambda _t: seen.append(env.scheduled()))
    while env.peek() < math.inf:
        env.step()
    assert seen == [True, True, False]


def test_call_at_refuses_the_past_and_nan() -> None:
    env = TwinEnvironment()
    env.call_at(1.0, lambda _t: None)
    env.step()
    for bad in (0.5, math.nan):
        with pytest.raises(ValueError, match="earlier than now"):
            env.call_at(bad, lambda _t: None)
    env.call_at(1.5, lambda _t: None)  # a refused time leaves nothing behind
    env.step()
    assert env.now == 1.5 and env.peek() == math.inf


def test_a_failed_event_raises_from_step_as_simpy_makes_it() -> None:
    env = TwinEnvironment()
    env.event().fail(RuntimeError("boom"))
    with pytest.raises(RuntimeError, match="boom"):
        env.step()
    defused = env.event().fail(RuntimeError("handled"))
    defused.defused = True
    env.step()  # a defused failure is not raised
