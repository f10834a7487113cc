"""Fair-share policies: VTC ordering, lift on re-activation, the paper's bound, baselines."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control.core.tenancy.fairshare import FAIR_SHARE_POLICIES, make_fair_share
from control.core.tenancy.fairshare.rate_limit import RateLimitConfig
from control.core.tenancy.fairshare.vtc import VtcConfig, VtcFairShare
from tests.core.tenancy.builders import step


def test_registry_builds_every_policy_and_names_unknown_ones():
    for name in FAIR_SHARE_POLICIES:
        assert make_fair_share(name).name == name
    with pytest.raises(ValueError, match="'nope'"):
        make_fair_share("nope")
    with pytest.raises(TypeError, match="VtcConfig"):
        make_fair_share("vtc", RateLimitConfig())


@pytest.mark.parametrize(
    "items, expected",
    [
        # critical work of a tenant overtakes its own earlier standard and batch work
        (
            [
                step("s", "a", at=0),
                step("b", "a", cls="batch", at=1),
                step("c", "a", cls="critical", at=2),
            ],
            ["c", "s", "b"],
        ),
        # same class: the earlier deadline first, no deadline last
        (
            [
                step("x", "a", at=0),
                step("y", "a", at=1, deadline=9.0),
                step("z", "a", at=2, deadline=5.0),
            ],
            ["z", "y", "x"],
        ),
    ],
)
def test_priority_orders_a_tenants_own_work(items, expected):
    vtc = VtcFairShare()
    assert [i.key for i in vtc.order(items, now=3.0)] == expected


def test_order_interleaves_tenants_by_weighted_counter():
    vtc = VtcFairShare()
    vtc.set_weights({"a": 1, "b": 3})
    items = [step(f"a{i}", "a", cost=30, at=i) for i in range(4)]
    items += [step(f"b{i}", "b", cost=30, at=10 + i) for i in range(8)]
    for t in ("a", "b"):
        vtc.on_backlogged(t, 0.0)
    first_eight = [i.tenant_id for i in vtc.order(items, 0.0)[:8]]
    # weight 3 gets three steps for each of a's (within one step of the exact ratio)
    assert abs(first_eight.count("b") - 6) <= 1
    assert vtc.counters() == {"a": 0, "b": 0}  # order() is pure


def test_critical_work_does_not_jump_other_tenants_share():
    vtc = VtcFairShare()
    vtc.on_backlogged("a", 0.0)
    vtc.on_backlogged("b", 0.0)
    vtc.charge("a", 100, 0.0)  # a is ahead
    items = [step("a-crit", "a", cls="critical"), step("b-batch", "b", cls="batch")]
    assert [i.key for i in vtc.order(items, 1.0)] == ["b-batch", "a-crit"]


@pytest.mark.parametrize("lift, b_share_at_least", [(True, 0.4), (False, 0.0)])
def test_returning_tenant_cannot_bank_idle_time(lift, b_share_at_least):
    vtc = VtcFairShare(VtcConfig(lift_on_backlog=lift))
    vtc.on_backlogged("a", 0.0)
    vtc.on_backlogged("b", 0.0)
    vtc.charge("b", 10, 0.0)
    vtc.on_idle("b", 0.0)
    for _ in range(100):  # a is served alone for a long time
        vtc.charge("a", 10, 1.0)
    vtc.on_backlogged("b", 2.0)
    served = {"a": 0, "b": 0}
    for _ in range(20):
        items = [step("a", "a"), step("b", "b")]
        first = vtc.order(items, 3.0)[0]
        vtc.charge(first.tenant_id, 10, 3.0)
        served[first.tenant_id] += 1
    # with the lift a and b alternate; without it b takes everything until it catches up
    assert (served["a"] / 20 >= b_share_at_least) and (served["a"] > 0) == lift


def test_charge_rejects_negative_cost_and_weights_must_be_positive():
    vtc = VtcFairShare()
    with pytest.raises(ValueError, match="-1"):
        vtc.charge("a", -1, 0.0)
    with pytest.raises(ValueError, match="'b'"):
        vtc.set_weights({"a": 1, "b": 0})


@settings(max_examples=60, deadline=None)
@given(
    weights=st.lists(st.integers(1, 4), min_size=2, max_size=4),
    costs=st.lists(st.integers(1, 50), min_size=40, max_size=120),
    batches=st.lists(st.integers(1, 6), min_size=10, max_size=30),
)
def test_backlogged_service_difference_stays_within_bound(weights, costs, batches):
    """Bound tested (Sheng et al., Thm. 4.4 with whole-step charges): for tenants f, g that are
    backlogged throughout [t1, t2], |W_f/w_f - W_g/w_g| <= 2 * (C_max / w_min + 3/1000), where
    C_max is the largest step cost; the 3/1000 covers the milli-unit rounding of counters."""
    tenants = [f"t{i}" for i in range(len(weights))]
    w = dict(zip(tenants, weights, strict=True))
    vtc = VtcFairShare()
    vtc.set_weights(w)
    cost_iter = iter(costs * 20)
    queue, seq = [], 0
    for t in tenants:  # more steps queued than a batch takes: continuously backlogged
        for _ in range(max(batches)):
            queue.append(step(f"k{seq}", t, cost=next(cost_iter), at=seq))
            seq += 1
        vtc.on_backlogged(t, 0.0)
    served = {t: 0 for t in tenants}
    history = [dict(served)]
    for size in batches:
        for item in vtc.order(queue, float(seq))[:size]:
            vtc.charge(item.tenant_id, item.cost_units, float(seq))
            served[item.tenant_id] += item.cost_units
            history.append(dict(served))
            queue.remove(item)
            queue.append(step(f"k{seq}", item.tenant_id, cost=next(cost_iter), at=seq))
            seq += 1
    bound = 2 * (Fraction(max(costs), min(weights)) + Fraction(3, 1000))
    for f in tenants:
        for g in tenants:
            d = [Fraction(h[f], w[f]) - Fraction(h[g], w[g]) for h in history]
            assert max(d) - min(d) <= bound


@pytest.mark.parametrize("name", ["fcfs", "rate_limit"])
def test_baselines_serve_in_arrival_order(name):
    policy = make_fair_share(name)
    items = [step("late", "a", at=5), step("early", "b", at=1), step("mid", "a", at=3)]
    assert [i.key for i in policy.order(items, 6.0)] == ["early", "mid", "late"]


def test_rate_limiter_refuses_past_its_window_then_recovers():
    limiter = make_fair_share("rate_limit", RateLimitConfig(max_requests=2, window_s=10.0))
    limiter.set_weights({"a": 1, "b": 2})
    assert limiter.gate("a", 0.0) is None and limiter.gate("a", 1.0) is None
    assert limiter.gate("a", 2.0) == pytest.approx(8.0)  # the first start expires at t=10
    assert all(limiter.gate("b", 2.0) is None for _ in range(4))  # weight 2: four starts
    assert limiter.gate("a", 10.5) is None
