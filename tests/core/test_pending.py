"""Pending queues (late binding): ``take`` serves exactly what ``order`` over the whole queue
would, for every registered fair-share policy; removal and the backlog figure stay exact."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control.core.pending import PendingQueue
from control.core.tenancy.config import TenancyManagerConfig
from control.core.tenancy.fairshare import FAIR_SHARE_POLICIES
from control.core.tenancy.manager import TenancyManager
from tests.core.tenancy.builders import config, step

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

items = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.integers(1, 500),  # cost units
        st.sampled_from(["critical", "standard", "batch"]),
        st.integers(0, 20),  # arrival (coarse: ties happen)
        st.one_of(st.none(), st.integers(1, 5)),  # deadline
    ),
    min_size=1,
    max_size=40,
)


class Step:
    """The parts of a ``QueuedStep`` a pending queue reads."""

    def __init__(self, work, est_us: int) -> None:  # noqa: ANN001
        self.work, self.key, self.est_us = work, work.key, est_us


def manager(policy: str, charged: list[tuple[str, int]]) -> TenancyManager:
    ten = TenancyManager(TenancyManagerConfig(fair_share=policy))
    ten.configure(config({"a": (1, None), "b": (2, None), "c": (3, None)}), 0.0)
    for tenant, cost in charged:
        ten.charge(tenant, cost, 0.0)
    return ten


def fill(ten: TenancyManager, rows) -> tuple[PendingQueue, list[Step]]:  # noqa: ANN001
    queue = PendingQueue("m:1")
    steps = []
    for i, (tenant, cost, cls, at, deadline) in enumerate(rows):
        s = Step(step(f"k{i:02d}", tenant, cost, cls, float(at), deadline), est_us=cost * 10)
        ten.on_enqueue(s.work, float(at))
        queue.push(s, ten)  # type: ignore[arg-type]
        steps.append(s)
    return queue, steps


@SETTINGS
@given(
    items,
    st.sampled_from(sorted(FAIR_SHARE_POLICIES)),
    st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 900)), max_size=4),
    st.lists(st.integers(1, 9), min_size=1, max_size=6),
)
def test_take_serves_the_prefix_of_the_full_order(rows, policy, charged, takes) -> None:  # noqa: ANN001
    ten = manager(policy, charged)
    queue, steps = fill(ten, rows)
    left = {s.key: s for s in steps}
    for k in takes:
        expected = [w.key for w in ten.order([s.work for s in left.values()], 30.0)][:k]
        got = [s.key for s in queue.take(k, ten, 30.0)]  # type: ignore[attr-defined]
        assert got == expected
        for key in got:
            del left[key]
        assert len(queue) == len(left)
        assert queue.us == sum(s.est_us for s in left.values())


@SETTINGS
@given(items, st.data())
def test_remove_keeps_order_and_backlog_exact(rows, data) -> None:  # noqa: ANN001
    ten = manager("vtc", [])
    queue, steps = fill(ten, rows)
    gone = data.draw(st.lists(st.sampled_from(steps), unique_by=lambda s: s.key))
    for s in gone:
        assert queue.remove(s) is True  # type: ignore[arg-type]
        assert queue.remove(s) is False  # type: ignore[arg-type]
    left = [s for s in steps if s not in gone]
    expected = [w.key for w in ten.order([s.work for s in left], 30.0)]
    assert [s.key for s in queue.ordered(ten, 30.0)] == expected  # type: ignore[attr-defined]
    assert queue.us == sum(s.est_us for s in left)


def test_push_twice_names_the_step() -> None:
    ten = manager("vtc", [])
    queue, steps = fill(ten, [("a", 1, "standard", 0, None)])
    try:
        queue.push(steps[0], ten)  # type: ignore[arg-type]
    except ValueError as err:
        assert "'k00'" in str(err) and "m:1" in str(err)
    else:
        raise AssertionError("a second push of the same step must raise")
