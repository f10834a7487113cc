"""Headroom reservations: reserved slots go to allowed classes, others only preemptibly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control.core.tenancy.base import HeadroomSpec, PoolUsage
from control.core.tenancy.headroom import HeadroomGuard


def guard(reserved_milli=250, borrowable=True) -> HeadroomGuard:
    g = HeadroomGuard()
    g.configure(
        [
            HeadroomSpec(
                "burst",
                frozenset({"d0", "d1"}),
                reserved_milli,
                frozenset({"critical"}),
                borrowable,
            )
        ]
    )
    return g


def usage(used0, used1, pre0=0, pre1=0, cap=4):
    return {"d0": PoolUsage("d0", cap, used0, pre0), "d1": PoolUsage("d1", cap, used1, pre1)}


@pytest.mark.parametrize(
    "cls, used, borrowable, allowed, preemptible",
    [
        ("standard", (2, 3), True, True, False),  # 5 used of 8, 2 reserved: room outside
        ("standard", (3, 3), True, True, True),  # only reserved slots left: preemptibly
        ("standard", (3, 3), False, False, False),  # reservation does not lend
        ("critical", (3, 4), False, True, False),  # allowed class uses its reservation
        ("critical", (4, 4), True, False, False),  # truly full, nothing preemptible
    ],
)
def test_headroom_decisions(cls, used, borrowable, allowed, preemptible):
    decision = guard(borrowable=borrowable).check("d0", cls, usage(*used))
    assert (decision.allowed, decision.preemptible) == (allowed, preemptible)
    assert decision.reason


def test_device_outside_every_pool_is_not_restricted():
    assert guard().check("d9", "batch", {"d9": PoolUsage("d9", 1, 0)}).allowed


def test_reserved_milli_out_of_range_names_the_reservation():
    with pytest.raises(ValueError, match="'x'"):
        HeadroomGuard().configure([HeadroomSpec("x", frozenset(), 1200, frozenset(), True)])


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["critical", "standard", "batch", "done"]),
            st.integers(0, 1),
            st.integers(0, 99),
        ),
        max_size=80,
    ),
    reserved=st.integers(0, 1000),
    borrowable=st.booleans(),
)
def test_reserved_headroom_is_used_by_others_only_preemptibly(ops, reserved, borrowable):
    g, cap = guard(reserved, borrowable), 4
    slots: dict[str, list[tuple[str, bool]]] = {"d0": [], "d1": []}
    reserved_slots = -(-2 * cap * reserved // 1000)
    for cls, dev_index, pick in ops:
        device = f"d{dev_index}"
        if cls == "done":
            if slots[device]:
                slots[device].pop(pick % len(slots[device]))
            continue
        view = {d: PoolUsage(d, cap, len(s), sum(p for _, p in s)) for d, s in slots.items()}
        decision = g.check(device, cls, view)
        if decision.allowed:
            if len(slots[device]) >= cap:  # the caller preempts preemptible work for it
                victim = next(i for i, (_, p) in enumerate(slots[device]) if p)
                slots[device].pop(victim)
            slots[device].append((cls, decision.preemptible))
        others_firm = sum(1 for s in slots.values() for c, p in s if c != "critical" and not p)
        assert others_firm <= 2 * cap - reserved_slots
        assert all(len(s) <= cap for s in slots.values())
