"""The what-if's "headroom in use" figure: the busy share of a reservation's serving devices
above what is left to everyone, over the reserved share (device busy time for batch slots)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from control.core.tenancy.base import HeadroomSpec, TenancyConfig
from sim.scenario import PlacedReplica
from sim.scenario_io import read_scenario_dict
from sim.whatif import compare, headroom_in_use


def _world(reserved_milli: int, busy: dict[str, list[float]], placed=("a", "b")):  # noqa: ANN001, ANN202
    spec = HeadroomSpec(
        "burst", frozenset({"a", "b", "c"}), reserved_milli, frozenset({"critical"}), True
    )
    scenario = SimpleNamespace(placement=[PlacedReplica("m:1", (d,)) for d in placed],
                               tenancy=TenancyConfig(headroom=(spec,)))  # fmt: skip
    rec = SimpleNamespace(bucket_s=1.0, busy={d: dict(enumerate(v)) for d, v in busy.items()})
    return scenario, rec


@pytest.mark.parametrize(
    ("reserved", "busy", "expected"),
    [
        (200, {"a": [1.0, 1.0], "b": [1.0, 1.0]}, 1.0),  # pool saturated: all reserved in use
        (200, {"a": [0.9], "b": [0.9]}, 0.5),  # 10 of the 20 points above the free 80 %
        (200, {"a": [0.5], "b": [0.5]}, 0.0),  # below what everyone may use
        (200, {"a": [1.0, 0.0], "b": [1.0, 0.0]}, 0.5),  # a burst half of the time
        (500, {"a": [1.0], "b": [0.0]}, 0.0),  # half the pool busy = exactly the free half
        (200, {"a": [1.0], "b": [1.0], "c": [0.0]}, 1.0),  # c serves nothing: not in the pool
    ],
)  # fmt: skip
def test_headroom_in_use_is_the_busy_share_above_the_free_part(reserved, busy, expected):
    scenario, rec = _world(reserved, busy)
    assert headroom_in_use(scenario, rec) == pytest.approx(expected)


def test_nothing_reserved_on_a_serving_device_has_no_figure():
    scenario, rec = _world(200, {"a": [1.0]}, placed=("z",))
    assert headroom_in_use(scenario, rec) is None
    scenario, rec = _world(0, {"a": [1.0]})
    assert headroom_in_use(scenario, rec) is None


def test_comparison_reports_headroom_in_use_with_an_interval_and_no_verdict():
    raw = read_scenario_dict("rag_enterprise")
    raw.pop("variants", None)
    raw["workload"]["max_requests"] = 60
    more = [{**h, "reserved_milli": 400} for h in raw["headroom"]]
    _, (comp,) = compare(raw, {"more": {"headroom": more}}, seeds=[0, 1])
    row = next(r for r in comp.rows if r.metric == "fleet.headroom_in_use")
    assert 0.0 <= row.baseline <= 1.0 and 0.0 <= row.variant <= 1.0 and row.ci95 >= 0
    assert row.better is None  # neither more nor less use of the reserve is better in itself
