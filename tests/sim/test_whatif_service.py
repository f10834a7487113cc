"""What-if runs through the services: stored, run in a worker process, finished with results."""

from __future__ import annotations

from control.services.analysis import WhatIfService
from control.services.whatif import WhatIfEngine
from db.migrate import upgrade
from db.session import make_engine, make_session_factory
from sim.scenario_io import read_scenario_dict


def test_whatif_run_is_stored_and_finished_by_a_worker(tmp_path):
    url = f"sqlite:///{tmp_path / 'legato.db'}"
    upgrade(url)
    svc = WhatIfService(make_session_factory(make_engine(url)))
    raw = read_scenario_dict("agent_dag")
    variants = raw.pop("variants")
    raw["workload"]["max_requests"] = 20
    engine = WhatIfEngine(svc, url)
    run_id = engine.start("alice", raw, variants, seeds=[0, 1])
    engine.wait(run_id, timeout_s=120)
    rec = svc.get(run_id)
    assert rec.status == "succeeded", rec.error
    assert rec.progress_milli == 1000
    (comp,) = rec.results["comparisons"]
    assert comp["variant"] == "no_preload" and comp["verdict"].startswith("no_preload:")
    assert rec.results["baseline"]["metrics"]["all.requests"]["per_seed"] == [20, 20]


def test_a_bad_scenario_fails_the_run_with_its_reason(tmp_path):
    url = f"sqlite:///{tmp_path / 'legato.db'}"
    upgrade(url)
    svc = WhatIfService(make_session_factory(make_engine(url)))
    engine = WhatIfEngine(svc, url)
    run_id = engine.start("alice", {"name": "empty", "workload": {"workflows": {"nope": 1}}}, {})
    engine.wait(run_id, timeout_s=120)
    rec = svc.get(run_id)
    assert rec.status == "failed" and "nope" in (rec.error or "")
