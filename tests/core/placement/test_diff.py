"""Plan diffs are exact: loads, evictions, moves, pool changes, unchanged."""

from __future__ import annotations

import pytest

from control.core.placement import Placement, PlacementPlan, PlanError, apply_diff, diff


def plan(*items: tuple[str, tuple[str, ...], int, str]) -> PlacementPlan:
    return PlacementPlan(tuple(Placement(k, g, n, pool, f"why {k} {g}") for k, g, n, pool in items))


CASES = [
    # (old, new, loads, evictions, moves, pool changes, unchanged replicas)
    (plan(), plan(("a", ("d0",), 1, "hot")), 1, 0, 0, 0, 0),
    (plan(("a", ("d0",), 1, "hot")), plan(), 0, 1, 0, 0, 0),
    (plan(("a", ("d0",), 1, "hot")), plan(("a", ("d1",), 1, "hot")), 0, 0, 1, 0, 0),
    (
        plan(("a", ("d0",), 2, "hot")),
        plan(("a", ("d0",), 1, "hot"), ("a", ("d1",), 2, "hot")),
        1,
        0,
        1,
        0,
        1,
    ),
    (plan(("a", ("d0",), 1, "hot")), plan(("a", ("d0",), 1, "cold")), 0, 0, 0, 1, 1),
    (
        plan(("a", ("d0", "d1"), 1, "hot"), ("b", ("d2",), 1, "hot")),
        plan(("a", ("d2", "d3"), 1, "hot")),
        0,
        1,
        1,
        0,
        0,
    ),
    (plan(("a", ("d0",), 3, "hot")), plan(("a", ("d0",), 3, "hot")), 0, 0, 0, 0, 3),
]


@pytest.mark.parametrize(("old", "new", "loads", "evictions", "moves", "pools", "kept"), CASES)
def test_diff_counts_and_round_trip(old, new, loads, evictions, moves, pools, kept):  # noqa: ANN001
    d = diff(old, new)
    assert (len(d.loads), len(d.evictions), len(d.moves), len(d.pool_changes)) == (
        loads,
        evictions,
        moves,
        pools,
    )
    assert sum(u.replicas for u in d.unchanged) == kept
    assert apply_diff(old, d).placements == new.placements
    assert diff(new, new).empty and not diff(new, new).loads


def test_move_names_source_and_destination():
    d = diff(plan(("a", ("d0",), 1, "hot")), plan(("a", ("d5",), 1, "hot")))
    (m,) = d.moves
    assert (m.model_key, m.from_devices, m.to_devices) == ("a", ("d0",), ("d5",))
    assert m.reason == "why a ('d5',)"


def test_diff_against_none_loads_everything():
    new = plan(("a", ("d0",), 2, "hot"), ("b", ("d1",), 1, "cold"))
    d = diff(None, new)
    assert len(d.loads) == 3 and apply_diff(None, d).placements == new.placements


def test_apply_to_the_wrong_plan_raises():
    d = diff(plan(("a", ("d0",), 1, "hot")), plan())
    with pytest.raises(PlanError, match="no replica of a"):
        apply_diff(plan(("a", ("d9",), 1, "hot")), d)


def test_plan_rejects_duplicate_slot_and_bad_fields():
    with pytest.raises(PlanError, match="at most once"):
        plan(("a", ("d0",), 1, "hot"), ("a", ("d0",), 1, "cold"))
    with pytest.raises(PlanError, match="replicas=0"):
        Placement("a", ("d0",), 0)
    with pytest.raises(PlanError, match="pool='warm'"):
        Placement("a", ("d0",), 1, "warm")
    with pytest.raises(PlanError, match="distinct"):
        Placement("a", ("d0", "d0"))
