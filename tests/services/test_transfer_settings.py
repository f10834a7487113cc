"""The transfer pricing set in the settings reaches the core the server runs:
``LEGATO_INTERCONNECTS`` names a fabric's figures, ``LEGATO_CORE_POLICIES`` changes any tier
over them, and on Ray the measured cross-node hop still replaces the cross-node latency."""

from __future__ import annotations

import json
import shutil

import pytest

from control.config import Settings
from control.core.routing.interconnects import interconnect
from control.services.policy_doc import PolicyFieldError
from control.wiring.executor import TRANSFER_CALIBRATION
from control.wiring.live import serving_core_config
from control.wiring.policies import policies_from_settings
from control.wiring.serve import build_serve_runtime

H100 = "h100-sxm-nvlink4-ndr400"


def test_a_named_interconnect_with_a_changed_tier_reaches_the_served_core(
    tmp_path, _sqlite_template
):
    shutil.copyfile(_sqlite_template, tmp_path / "legato.db")
    (tmp_path / TRANSFER_CALIBRATION).parent.mkdir(parents=True)
    (tmp_path / TRANSFER_CALIBRATION).write_text(json.dumps({"other_node_us": 777}))
    settings = Settings(
        var_dir=tmp_path, database_url=f"sqlite:///{tmp_path / 'legato.db'}", executor="ray",
        interconnects=H100, core_policies={"transfer": {"other_node_mb_per_s": 1_000}},
    )  # fmt: skip
    transfer = build_serve_runtime(settings).blueprint.core_config.transfer  # not started
    h100 = interconnect(H100)
    assert transfer.same_group_mb_per_s == h100.same_group_mb_per_s == 450_000
    assert transfer.other_node_mb_per_s == 1_000  # LEGATO_CORE_POLICIES over the preset
    assert transfer.other_node_us == 777  # the measured hop over both


def test_an_unknown_interconnect_stops_the_start_naming_the_known_ones(tmp_path):
    settings = Settings(var_dir=tmp_path, interconnects="nvlink9")
    with pytest.raises(PolicyFieldError, match="transfer: LEGATO_INTERCONNECTS: .*known: h100"):
        policies_from_settings(settings, serving_core_config())


def test_without_the_setting_the_fixed_costs_stay(tmp_path):
    core = policies_from_settings(Settings(var_dir=tmp_path), serving_core_config()).core
    assert core.transfer == serving_core_config().transfer and not core.transfer.prices_bytes
