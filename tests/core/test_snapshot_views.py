"""The core's read views under a backlog: the snapshot explains every queued request from ONE
fair-share ordering, and the gauges the live metrics sample need no snapshot at all."""

from __future__ import annotations

import re

from control.core.actions import Dispatch
from control.core.tenancy.manager import TenancyManager
from control.core.types import Request
from tests.core.tenancy.builders import config
from tests.support.builders import EMBED, devices, make_core, single

DEVS = devices(2, 1)


def _backlogged_core(n: int = 30):  # noqa: ANN202
    """One replica of minilm busy with a batch; ``n`` more requests of three tenants wait."""
    tenancy = TenancyManager()
    tenancy.configure(config({"a": (1, None), "b": (2, None), "c": (3, None)}), now=0.0)
    core = make_core(tenancy, devs=DEVS, replicas=[("minilm:1", "d000")], workflows=[single(EMBED)])
    for i in range(n):
        core.submit(Request(f"q{i}", "abc"[i % 3], "only-minilm", prompt_tokens=64), 0.0)
    assert core.step(0.0).of_type(Dispatch)  # the first batch runs; the rest waits for it
    return core, tenancy


class _CountingOrders:
    """A fair-share policy that counts its ``order`` calls and otherwise is ``inner`` (the
    compiled policies of the native build take no replaced methods)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.calls: list[int] = []

    def order(self, items, now):  # noqa: ANN001, ANN201
        self.calls.append(len(items))
        return self.inner.order(items, now)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


def test_snapshot_orders_the_queue_once_and_explains_every_step_as_alone() -> None:
    core, tenancy = _backlogged_core()
    counting = _CountingOrders(tenancy.fair)
    tenancy.fair = counting  # type: ignore[assignment]
    snap = core.snapshot()
    # not one ordering per queued request (quadratic in the backlog)
    assert len(counting.calls) == 1
    waiting = [v for views in snap.pending.values() for v in views]
    assert len(waiting) >= 20
    for view in waiting:  # the same sentence as explaining the request on its own
        alone = tenancy.explain(view.request_id, snap.now)
        assert view.why.endswith(f"| tenancy: {alone}")
    positions = [int(re.search(r"position (\d+) of", v.why).group(1)) for v in waiting]
    assert sorted(positions) == list(range(1, len(waiting) + 1))


def test_gauges_count_what_the_snapshot_shows_without_building_one() -> None:
    core, _ = _backlogged_core()
    gauges = core.gauges()
    snap = core.snapshot()
    queued = sum(len(v) for v in snap.queues.values()) + sum(len(v) for v in snap.pending.values())
    assert gauges.queue_depth["minilm:1"] == queued > 0
    assert gauges.queue_depth["unplaced"] == len(snap.unplaced)
    assert gauges.runs_in_flight == len(snap.runs) == 30
    assert gauges.preload == snap.preload
    assert gauges.device_ids == tuple(d.device_id for d in snap.devices)
