"""LEGATO_CANARY_* reach the core the gateway builds; bad values are refused naming them."""

from __future__ import annotations

import pytest

from control.api.settings import GatewaySettings
from control.wiring.gateway import live_options
from control.wiring.live import serving_core_config

NAMES = ("LEGATO_CANARY_ERROR_MARGIN", "LEGATO_CANARY_P99_MARGIN", "LEGATO_CANARY_MIN_SAMPLES",
         "LEGATO_CANARY_WINDOW", "LEGATO_CANARY_P99_MIN_DELTA_S")  # fmt: skip


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)


def test_defaults_and_settings_reach_the_core_config(monkeypatch):
    core = live_options(GatewaySettings(_env_file=None)).core_config
    assert (core.canary.error_margin, core.canary.p99_margin) == (0.05, 1.0)
    assert (core.canary.min_samples, core.canary.window) == (20, 200)
    assert core.canary.p99_min_delta_s == 0.05
    for name, value in zip(NAMES, ("0.1", "0.5", "50", "10", "0.2"), strict=True):
        monkeypatch.setenv(name, value)
    core = live_options(GatewaySettings(_env_file=None)).core_config
    assert (core.canary.error_margin, core.canary.p99_margin) == (0.1, 0.5)
    # a window below the sample count is raised to it (every judged sample is kept)
    assert (core.canary.min_samples, core.canary.window) == (50, 50)
    assert core.canary.p99_min_delta_s == 0.2
    assert core.batching_config == serving_core_config().batching_config  # still serving's


@pytest.mark.parametrize(
    ("name", "value"),
    [("LEGATO_CANARY_ERROR_MARGIN", "1.5"), ("LEGATO_CANARY_P99_MARGIN", "-1"),
     ("LEGATO_CANARY_MIN_SAMPLES", "0")],
)  # fmt: skip
def test_bad_values_are_refused_naming_them(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name.removeprefix("LEGATO_").lower()):
        GatewaySettings(_env_file=None)
