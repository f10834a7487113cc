"""The batch fault settings (breakers, hang deadlines) reach whichever executor the settings
select: an operator tunes them with ``LEGATO_BREAKER_*`` and ``LEGATO_HANG_*``."""

from __future__ import annotations

import pytest

from control.config import Settings
from control.executor.protocol import DeviceInfo
from control.wiring.executor import build_executor

TUNED = dict(breaker_failures=2, breaker_cooldown_s=1.5, hang_multiple=3.0, hang_floor_s=12.0)


def _check(config) -> None:  # noqa: ANN001
    assert (config.breaker.failure_threshold, config.breaker.cooldown_s) == (2, 1.5)
    assert (config.hang_multiple, config.hang_floor_s) == (3.0, 12.0)


def test_the_local_executor_takes_the_fault_settings(tmp_path) -> None:  # noqa: ANN001
    settings = Settings(var_dir=tmp_path, **TUNED)
    executor = build_executor(settings, [DeviceInfo("cpu:0", "cpu", 0, 512, 0)])
    _check(executor.config)


def test_the_ray_executor_takes_the_fault_settings(tmp_path) -> None:  # noqa: ANN001
    pytest.importorskip("ray")
    executor = build_executor(Settings(var_dir=tmp_path, executor="ray", **TUNED))
    _check(executor.config)  # built, not started: no cluster is joined


def test_the_environment_names_them(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("LEGATO_BREAKER_FAILURES", "4")
    monkeypatch.setenv("LEGATO_HANG_FLOOR_S", "20")
    settings = Settings(var_dir=tmp_path)
    assert (settings.breaker_failures, settings.hang_floor_s) == (4, 20.0)
    with pytest.raises(ValueError, match="breaker_failures"):
        Settings(var_dir=tmp_path, breaker_failures=0)
