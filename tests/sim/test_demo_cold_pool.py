"""The seeded demo fleet in the twin: its reranker scales to zero when idle, and a RAG run that
starts while it has none preloads it speculatively on the demo's cold pool (cold-start
isolation: the load lands on ``cold-l4-*``, not beside a hot replica); the preload is used."""

from __future__ import annotations

from control.config import Settings
from control.services.seed import seed_demo
from control.services.whatif import scenario_from_db
from db.session import make_engine, make_session_factory
from sim.scenario_io import scenario_from_dict
from sim.whatif import run_scenario
from tests.sim.test_scenario_from_db import LOCAL

#: RAG runs far apart (mean gap 1000 s): the reranker (idle_ms 300 000, min_replicas 0) drains
#: between them
SPARSE = {
    "trace": "synthetic",
    "synthetic": {"rate_rps": 0.001, "duration_s": 20000.0, "input_tokens": 64,
                  "output_tokens": 8},
    "max_requests": 40,
    "tenants": {"acme": 1},
    "workflows": {"rag:1": 1},
}  # fmt: skip


def test_idle_reranker_is_preloaded_on_the_cold_pool_and_used(db_url: str, tmp_path) -> None:
    seed_demo(db_url, Settings(var_dir=tmp_path), local_devices=LOCAL)
    engine = make_engine(db_url)
    try:
        raw = scenario_from_db(make_session_factory(engine), SPARSE)
    finally:
        engine.dispose()
    cold = {d["device_id"] for d in raw["devices"] if d["pool"] == "cold"}
    assert cold == {"cold-l4-0", "cold-l4-1"}
    rerank = next(m for m in raw["models"] if m["name"] == "minilm-rerank")
    assert (rerank["min_replicas"], rerank["idle_s"]) == (0, 300.0)
    rep = run_scenario(scenario_from_dict(raw), seeds=(0,))
    assert rep.get("all.unfinished") == 0 and rep.get("all.failed") == 0
    assert rep.get("fleet.preloads_issued") >= 1
    assert rep.get("fleet.preload_hit_rate") > 0.5  # preloads used before their eviction
    assert rep.get("fleet.utilization.cold-l4-0") > 0  # the preloaded reranker served there
