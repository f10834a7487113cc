"""The simulated executor: measured scatter of device times, overhead, config checks."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control.core.actions import BatchItem, Dispatch
from control.core.latency import LatencyRow, TableLatencyModel
from control.core.types import DeviceSpec, ModelSpec
from sim.executor import SimExecutor, SimExecutorConfig
from sim.executor_models import service_factor

KEY = "m:1"
TABLE = TableLatencyModel([LatencyRow(KEY, "cpu", b, 64, 10_000 * b) for b in (1, 2, 4)])
DEVICE = DeviceSpec("cpu:0", "n0", "cpu", "cpu", 1024)


def _dispatch(batch_id: str, n: int = 2) -> Dispatch:
    items = tuple(
        BatchItem(f"{batch_id}/{i}", f"r{i}", "embed", 0, None, f"k{i}", "embed", (), 64, 0)
        for i in range(n)
    )
    return Dispatch(batch_id, f"{KEY}@cpu:0", KEY, None, ("cpu:0",), items, 128, 0, "test")


def _executor(**cfg) -> SimExecutor:
    config = SimExecutorConfig(prefix_cache=False, transfers=False, **cfg)
    return SimExecutor(TABLE, {"cpu:0": DEVICE}, {KEY: ModelSpec("m", "1", "embed", 64)}, config)


@pytest.mark.parametrize(
    ("cfg", "expect_us"),
    [({}, 20_000), ({"dispatch_overhead_us": 1_500}, 21_500)],
)
def test_without_scatter_a_batch_takes_the_table_time_plus_overhead(cfg, expect_us):
    ex = _executor(**cfg)
    assert [ex.run(_dispatch(f"b{i}")).duration_us for i in range(5)] == [expect_us] * 5


def test_scatter_is_seeded_per_batch_and_the_same_when_asked_again():
    ex = _executor(service_sigma_milli=300)
    first = [ex.run(_dispatch(f"b{i}")).duration_us for i in range(50)]
    again = [ex.run(_dispatch(f"b{i}")).duration_us for i in reversed(range(50))][::-1]
    assert first == again  # independent of the order batches are predicted in
    assert len(set(first)) > 40  # and really scattered


@settings(max_examples=20, deadline=None)
@given(sigma_milli=st.integers(50, 800), seed=st.integers(0, 10_000))
def test_scatter_has_median_one_and_the_stated_spread(sigma_milli, seed):
    logs = [math.log(service_factor(f"b{i}", seed, sigma_milli)) for i in range(2000)]
    sigma = sigma_milli / 1000
    assert abs(statistics.median(logs)) < 0.1 * sigma + 0.01
    assert statistics.pstdev(logs) == pytest.approx(sigma, rel=0.1)


@pytest.mark.parametrize("name", ["service_sigma_milli", "dispatch_overhead_us", "tool_us"])
def test_negative_settings_are_refused_by_name(name):
    with pytest.raises(ValueError, match=name):
        SimExecutorConfig(**{name: -1})
