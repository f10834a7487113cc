"""Fairness metrics: service differences between backlogged tenants, Jain's index, shares."""

from __future__ import annotations

import pytest

from control.core.tenancy.metrics import (
    BacklogInterval,
    ServiceSample,
    fairness_summary,
    jain_index,
    service_over_time,
    share_vs_entitled,
)


@pytest.mark.parametrize(
    "values, expected",
    [([5.0, 5.0, 5.0], 1.0), ([1.0, 0.0, 0.0, 0.0], 0.25), ([], 1.0), ([1.0, 3.0], 16 / 20)],
)
def test_jain_index(values, expected):
    assert jain_index(values) == pytest.approx(expected)


def _samples(rates: dict[str, int], seconds: int) -> list[ServiceSample]:
    return [
        ServiceSample(t + 0.5, tenant, rate)
        for t in range(seconds)
        for tenant, rate in rates.items()
    ]


def test_only_tenants_backlogged_throughout_a_window_are_compared():
    samples = _samples({"a": 10, "b": 4}, 20)
    backlog = [BacklogInterval("a", 0, 20), BacklogInterval("b", 0, 10)]
    summary = fairness_summary(samples, backlog, {"a": 1, "b": 1}, 5.0, 5.0, 0.0, 20.0)
    assert summary.windows == 2  # b is backlogged only in the first two windows
    assert summary.max_diff == pytest.approx(5 * (10 - 4))
    assert summary.diff_var == pytest.approx(0.0)
    assert summary.jain < 0.9


def test_weights_turn_proportional_service_into_zero_difference():
    samples = _samples({"a": 10, "b": 30}, 20)
    backlog = [BacklogInterval("a", 0, 20), BacklogInterval("b", 0, 20)]
    summary = fairness_summary(samples, backlog, {"a": 1, "b": 3}, 5.0, 2.5, 0.0, 20.0)
    assert summary.max_diff == pytest.approx(0.0) and summary.jain == pytest.approx(1.0)
    assert summary.windows == 7


def test_service_over_time_and_shares():
    samples = _samples({"a": 1, "b": 3}, 10)
    per = service_over_time(samples, 5.0, 0.0, 10.0)
    assert per == {"a": [5, 5], "b": [15, 15]}
    shares = share_vs_entitled(samples, {"a": 1, "b": 1})
    assert (shares["a"].received_milli, shares["a"].entitled_milli) == (250, 500)
