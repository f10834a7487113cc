"""The settings select the executor backend (LEGATO_EXECUTOR, LEGATO_RAY_ADDRESS)."""

from __future__ import annotations

import pytest

from control.config import Settings
from control.executor.host import LocalExecutor
from control.executor.protocol import DeviceInfo
from control.executor.ray import RayExecutor
from control.wiring.executor import build_executor

pytestmark = pytest.mark.ray


def test_the_settings_select_the_backend(monkeypatch, tmp_path):
    monkeypatch.setenv("LEGATO_EXECUTOR", "ray")
    monkeypatch.setenv("LEGATO_RAY_ADDRESS", "10.0.0.1:6379")
    settings = Settings(var_dir=tmp_path)
    ex = build_executor(settings)  # built, not started: nothing connects yet
    assert isinstance(ex, RayExecutor)
    assert ex.config.ray.address == "10.0.0.1:6379"
    assert ex.config.cache_dir == str(tmp_path / "models")
    local = build_executor(Settings(var_dir=tmp_path, executor="local"),
                           [DeviceInfo("cpu:0", "cpu", 0, 512)])  # fmt: skip
    assert isinstance(local, LocalExecutor)
    monkeypatch.setenv("LEGATO_EXECUTOR", "spark")
    with pytest.raises(ValueError):
        Settings()


def test_the_ray_executor_has_every_protocol_method_with_its_parameters() -> None:
    import inspect

    from control.executor.protocol import Executor

    wanted = {n: inspect.signature(m) for n, m in vars(Executor).items()
              if callable(m) and not n.startswith("_")}  # fmt: skip
    assert {"start", "stop", "submit", "cancel", "load", "events", "poll"} <= set(wanted)
    for name, signature in wanted.items():
        found = inspect.signature(getattr(RayExecutor, name))
        shape = [(p.name, p.kind) for p in signature.parameters.values()]
        assert [(p.name, p.kind) for p in found.parameters.values()] == shape, name
