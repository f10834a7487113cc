"""The composition root builds the gateway's parts in dependency order and hands each its
callbacks through constructors: the gateway's metrics are the inference service's
``on_settled``, the live-config feed and the app share that one inference service, and the
commands' gateway over the settings' database serves the admin API without a runtime."""

from __future__ import annotations

import shutil

import pytest

from control.api.settings import GatewayConfig
from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.protocol import DeviceInfo
from control.services import build_services
from control.wiring.gateway import gateway_app
from control.wiring.live import build_live
from control.wiring.services import checked_services, session_factory


@pytest.fixture
def services(tmp_path, _sqlite_template):
    shutil.copyfile(_sqlite_template, tmp_path / "legato.db")
    return build_services(session_factory(f"sqlite:///{tmp_path / 'legato.db'}"))


def _executor() -> LocalExecutor:
    """A local executor that is never started (nothing is spawned)."""
    return LocalExecutor(ExecutorConfig(use_cuda=False), [DeviceInfo("cpu:0", "cpu", 0, 512, 0)])


def test_gateway_app_hands_its_metrics_to_the_inference_service(services):
    app = gateway_app(services, GatewayConfig(), _executor(), start_with_app=False)
    gw = app.state.gateway
    assert gw.inference is not None
    assert gw.inference.on_settled == gw.metrics.on_settled
    assert gw.live_config is not None and gw.live_config._inference is gw.inference
    assert gw.inference.started is False  # the wiring builds; the lifespan (or caller) starts


def test_without_an_executor_there_is_no_live_path(services):
    gw = gateway_app(services, GatewayConfig()).state.gateway
    assert (gw.inference, gw.live_config) == (None, None)


def test_build_live_makes_the_recorder_before_the_runtime(services):
    seen: list[object] = []
    live = build_live(services.factory, services, _executor(), on_settled=seen.append)  # type: ignore[arg-type]
    assert live.inference.on_settled == seen.append
    assert live.rollouts.pending == []  # nothing recorded until the runtime reports
    assert live.inference.runtime.blueprint.devices == ()  # the empty database's real fleet


def test_checked_services_validate_workflow_specs(services):
    checked, validator = checked_services(services.factory, b"pepper")
    assert validator({"nodes": []})  # the core's DAG check names what is wrong
