"""LEGATO_CAPACITY_ADMISSION / LEGATO_CAPACITY_MARGIN reach the core the gateway builds."""

from __future__ import annotations

import pytest

from control.api.settings import GatewaySettings
from control.wiring.gateway import live_options
from control.wiring.live import serving_core_config


@pytest.mark.parametrize(
    ("env", "enabled", "margin"),
    [({}, True, 1.0), ({"LEGATO_CAPACITY_ADMISSION": "off"}, False, 1.0),
     ({"LEGATO_CAPACITY_ADMISSION": "on", "LEGATO_CAPACITY_MARGIN": "1.5"}, True, 1.5)],
)  # fmt: skip
def test_capacity_settings_reach_the_core_config(monkeypatch, env, enabled, margin):
    for name in ("LEGATO_CAPACITY_ADMISSION", "LEGATO_CAPACITY_MARGIN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    core = live_options(GatewaySettings(_env_file=None)).core_config
    assert core.capacity_admission.enabled is enabled
    assert core.capacity_admission.margin == margin
    serving = serving_core_config()  # still the serving configuration otherwise
    assert (core.batching, core.batching_config) == (serving.batching, serving.batching_config)


def test_a_bad_margin_is_refused(monkeypatch):
    monkeypatch.setenv("LEGATO_CAPACITY_MARGIN", "0")
    with pytest.raises(ValueError, match="capacity_margin"):
        GatewaySettings(_env_file=None)


def test_the_door_headroom_setting_reaches_the_gateway_config(monkeypatch):
    from control.api.settings import gateway_config
    from control.config import Settings

    monkeypatch.setenv("LEGATO_CAPACITY_LOWER_CLASS_PATH_S", "0.02")
    config = gateway_config(Settings(_env_file=None), GatewaySettings(_env_file=None))
    assert config.capacity_lower_class_path_s == 0.02
