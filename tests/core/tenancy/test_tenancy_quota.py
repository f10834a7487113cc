"""Quota ledger: nominal, borrowing and lending limits in cohorts, reclaim, exact accounting."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control.core.tenancy.base import QuotaSpec, TenantSpec
from control.core.tenancy.quota import QuotaLedger
from tests.core.tenancy.builders import request


def ledger(quotas, cohort: str | None = "c1", tenants=("a", "b")) -> QuotaLedger:
    led = QuotaLedger()
    led.configure([TenantSpec(t, 1, cohort=cohort) for t in tenants], quotas)
    return led


def tpm(tenant, nominal, borrow=None, lend=None) -> QuotaSpec:
    return QuotaSpec(tenant, "tokens_per_min", nominal, borrow, lend, period_s=60)


@pytest.mark.parametrize(
    "quotas, cohort, a_uses, ask, ok, borrowed, reason_part",
    [
        ((tpm("a", 1000), tpm("b", 1000)), "c1", 500, 400, True, False, ""),
        ((tpm("a", 1000), tpm("b", 1000)), None, 800, 400, False, False, "in no cohort"),
        ((tpm("a", 1000), tpm("b", 1000)), "c1", 800, 400, True, True, ""),
        (
            (tpm("a", 1000, borrow=100), tpm("b", 1000)),
            "c1",
            800,
            400,
            False,
            False,
            "borrowing limit",
        ),
        ((tpm("a", 1000), tpm("b", 1000, lend=100)), "c1", 800, 400, False, False, "only 100 idle"),
        ((tpm("a", 1000), tpm("b", 1000, lend=300)), "c1", 800, 400, True, True, ""),
    ],
)
def test_admission_against_nominal_borrowing_and_lending(
    quotas, cohort, a_uses, ask, ok, borrowed, reason_part
):
    led = ledger(quotas, cohort)
    led.commit(request("first", "a", tokens=a_uses), False, now=0.0)
    verdict = led.check(request("next", "a", tokens=ask), now=1.0)
    assert (verdict.ok, verdict.borrowed) == (ok, borrowed)
    assert reason_part in verdict.reason
    if not ok:
        assert "tokens_per_min" in verdict.reason
        assert verdict.retry_after_s == pytest.approx(59.0)  # when the first run's tokens expire


def test_windowed_usage_expires_and_is_corrected_to_actual_at_release():
    led = ledger((tpm("a", 1000),), cohort=None, tenants=("a",))
    led.commit(request("r1", "a", tokens=600), False, 0.0)
    led.release("r1", used_tokens=250, used_cost_units=250, now=5.0)
    assert led.usage("a", "tokens_per_min", 5.0) == 250
    assert led.usage("a", "tokens_per_min", 60.5) == 0


def test_owner_reclaims_newest_borrowed_run_that_has_not_produced_output():
    led = ledger(
        (QuotaSpec("a", "concurrent_requests", 2), QuotaSpec("b", "concurrent_requests", 2))
    )
    for rid, t in [("b1", 0.0), ("b2", 1.0), ("b3", 2.0), ("b4", 3.0)]:
        verdict = led.check(request(rid, "b"), t)
        assert verdict.ok
        led.commit(request(rid, "b"), verdict.borrowed, t)
    assert led.check(request("a1", "a"), 4.0).ok  # a's nominal is always available to a
    led.commit(request("a1", "a"), False, 4.0)
    orders = led.reclaims(5.0, produced_output={"b4"})
    assert [rid for rid, _ in orders] == ["b3"]  # b4 already streams; b1/b2 are not borrowed
    assert "reclaim" in orders[0][1]
    assert led.reclaims(6.0, produced_output={"b4"}) == []  # named once


OPS = st.lists(
    st.tuples(
        st.sampled_from(["admit", "release", "reclaim", "tick"]),
        st.sampled_from(["a", "b", "c"]),
        st.integers(1, 400),
        st.integers(0, 1000),
    ),
    min_size=5,
    max_size=60,
)
LIMIT = st.one_of(st.none(), st.integers(0, 3))


@settings(max_examples=80, deadline=None)
@given(
    ops=OPS,
    nominals=st.lists(st.integers(0, 4), min_size=3, max_size=3),
    borrow=st.lists(LIMIT, min_size=3, max_size=3),
    lend=st.lists(LIMIT, min_size=3, max_size=3),
)
def test_ledger_invariants_under_any_interleaving(ops, nominals, borrow, lend):
    tenants = ("a", "b", "c")
    quotas = [
        QuotaSpec(t, "concurrent_requests", n, bl, ll)
        for t, n, bl, ll in zip(tenants, nominals, borrow, lend, strict=True)
    ]
    quotas += [QuotaSpec(t, "tokens_per_min", 500) for t in tenants]
    led = ledger(quotas, tenants=tenants)
    spec = {q.tenant_id: q for q in quotas if q.resource == "concurrent_requests"}
    live: dict[str, tuple[str, int]] = {}
    window: dict[str, list] = {}  # reference model: rid -> [tenant, admitted_at, tokens]
    streaming: set[str] = set()
    now, seq = 0.0, 0
    for op, tenant, tokens, pick in ops:
        if op == "tick":
            now += tokens / 10
        elif op == "admit":
            seq += 1
            rid = f"r{seq}"
            req = request(rid, tenant, tokens=tokens)
            within = led.usage(tenant, "concurrent_requests", now) + 1 <= spec[tenant].nominal
            window_ok = led.usage(tenant, "tokens_per_min", now) + tokens <= 500
            before = (
                led.borrowed(tenant, "concurrent_requests", now),
                led.overcommit(tenant, "concurrent_requests", now),
            )
            verdict = led.check(req, now)
            if within and window_ok:
                assert verdict.ok and not verdict.borrowed  # nominal is always reclaimable
            if verdict.ok:
                led.commit(req, verdict.borrowed, now)
                live[rid] = (tenant, tokens)
                window[rid] = [tenant, now, tokens]
                for t in tenants:  # borrowing never exceeds its limits when admitted
                    limit = spec[t].borrowing_limit
                    assert limit is None or led.borrowed(t, "concurrent_requests", now) <= limit
                if led.borrowed(tenant, "concurrent_requests", now) > before[0] and before[1] <= 0:
                    # new borrowing only from what the cohort lends (owners' reclaims aside)
                    assert led.overcommit(tenant, "concurrent_requests", now) <= 0
                if pick % 3 == 0:
                    streaming.add(rid)
        elif op == "release" and live:
            rid = sorted(live)[pick % len(live)]
            led.release(rid, tokens, tokens, now)
            if window[rid][1] > now - 60:
                window[rid][2] = tokens  # corrected to actual use while still in the window
            del live[rid]
        elif op == "reclaim":
            for rid, _ in led.reclaims(now, frozenset(streaming)):
                assert rid not in streaming  # preemption never hits a run that produced output
                led.release(rid, 0, 0, now)
                window[rid][2] = 0
                del live[rid]
            unpreemptable = sum(1 for r in live if r in streaming and led.is_borrowed(r))
            assert led.overcommit("a", "concurrent_requests", now) <= unpreemptable
        for t in tenants:  # held usage is exactly the runs in flight
            assert led.usage(t, "concurrent_requests", now) == sum(
                1 for x, _ in live.values() if x == t
            )
            assert led.usage(t, "tokens_per_min", now) == sum(
                n for x, at, n in window.values() if x == t and at > now - 60
            )
    for rid in list(live):
        led.release(rid, 0, 0, now)
    assert all(led.usage(t, "concurrent_requests", now) == 0 for t in tenants)
    assert all(led.usage(t, "tokens_per_min", now + 61) == 0 for t in tenants)
