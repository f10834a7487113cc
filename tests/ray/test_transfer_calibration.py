"""The core's cross-node transfer cost on the Ray executor is the measured one: what
``bench/ray_executor.py --calibrate`` wrote, read by the gateway's and ``legato serve``'s
wiring; the default stays on the local executor and without a calibration."""

from __future__ import annotations

import json
import shutil

from control.config import Settings
from control.core.routing.transfer import TransferCosts
from control.wiring.executor import TRANSFER_CALIBRATION, with_measured_transfer
from control.wiring.live import LiveOptions
from control.wiring.serve import build_serve_runtime

ASSUMED = TransferCosts().other_node_us


def _calibrate(var_dir, other_node_us) -> None:  # noqa: ANN001
    path = var_dir / TRANSFER_CALIBRATION
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"other_node_us": other_node_us}))


def test_the_ray_core_takes_the_measured_cross_node_cost(tmp_path):
    _calibrate(tmp_path, 1234)
    settings = Settings(var_dir=tmp_path, executor="ray")
    transfer = with_measured_transfer(LiveOptions(), settings).core_config.transfer
    assert transfer.other_node_us == 1234 != ASSUMED
    assert transfer.same_node_us == TransferCosts().same_node_us  # only what was measured


def test_the_local_executor_and_a_missing_calibration_keep_the_default(tmp_path):
    options = LiveOptions()
    assert with_measured_transfer(options, Settings(var_dir=tmp_path, executor="ray")) is options
    _calibrate(tmp_path, 1234)
    assert with_measured_transfer(options, Settings(var_dir=tmp_path)) is options


def test_serve_on_ray_takes_the_measured_cross_node_cost(tmp_path, _sqlite_template):
    shutil.copyfile(_sqlite_template, tmp_path / "legato.db")
    _calibrate(tmp_path, 1234)
    url = f"sqlite:///{tmp_path / 'legato.db'}"
    ray_serve = build_serve_runtime(Settings(var_dir=tmp_path, executor="ray", database_url=url))
    assert ray_serve.blueprint.core_config.transfer.other_node_us == 1234  # not started
    local_serve = build_serve_runtime(Settings(var_dir=tmp_path, database_url=url))
    assert local_serve.blueprint.core_config.transfer.other_node_us == ASSUMED
