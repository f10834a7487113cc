"""``scenario_from_db`` against a seeded database: the demo fleet runs in the twin as it stands."""

from __future__ import annotations

import pytest

from control.config import Settings
from control.executor.protocol import DeviceInfo
from control.services.seed import seed_demo
from control.services.whatif import scenario_from_db
from db.session import make_engine, make_session_factory
from sim.scenario_io import scenario_from_dict
from sim.whatif import run_scenario

LOCAL = [
    DeviceInfo("cpu:0", "cpu", 0, 4096, cpu_core=0),
    DeviceInfo("cpu:1", "cpu", 1, 4096, cpu_core=1),
]


@pytest.fixture
def seeded(db_url: str, tmp_path):
    seed_demo(db_url, Settings(var_dir=tmp_path), local_devices=LOCAL)
    engine = make_engine(db_url)
    yield make_session_factory(engine)
    engine.dispose()


@pytest.mark.parametrize("workflow", ["rag:1", "agent:1"])
def test_seeded_fleet_runs_in_the_twin(seeded, workflow: str) -> None:
    workload = {
        "trace": "synthetic",
        "synthetic": {"rate_rps": 2.0, "duration_s": 10.0, "input_tokens": 64, "output_tokens": 8},
        "max_requests": 12,
        "tenants": {"acme": 3, "globex": 2, "initech": 1},
        "workflows": {workflow: 1},
    }
    raw = scenario_from_db(seeded, workload)
    ids = {d["device_id"] for d in raw["devices"]}
    assert {"cpu:0", "cpu:1"} <= ids and len(ids) > 2  # local slots and declared GPUs
    assert {t["tenant_id"] for t in raw["tenants"]} == {"acme", "globex", "initech"}
    assert raw["placement"], "the seed's active plan reaches the scenario"
    sc = scenario_from_dict(raw)
    rep = run_scenario(sc, seeds=(0,))
    assert rep.get("all.requests") == 12
    assert rep.get("all.unfinished") == 0
    assert rep.get("all.succeeded") + rep.get("all.rejected") + rep.get("all.failed") == 12
    assert rep.get("all.succeeded") > 0
