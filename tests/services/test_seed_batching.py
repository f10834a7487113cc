"""The demo seed stores each LLM's batching mode as measured: SmolLM2 on a CPU static, the
declared 70B (a vLLM-class engine) continuous; the encoders never; the core sees the same."""

from __future__ import annotations

from control.config import Settings
from control.services.demo_fleet import DEMO_MODELS
from control.services.fleet_state import load_fleet_state
from control.services.seed import seed_demo
from db import models as m
from db.session import make_engine, make_session_factory, session_scope
from tests.services.test_seed import LOCAL


def test_seed_stores_the_batching_mode_per_model(db_url: str, tmp_path) -> None:
    seed_demo(db_url, Settings(var_dir=tmp_path), local_devices=LOCAL)
    engine = make_engine(db_url)
    try:
        with session_scope(make_session_factory(engine)) as s:
            stored = {f"{r.name}:{r.version}": r.continuous_batching
                      for r in s.query(m.ServedModel)}  # fmt: skip
            specs = {mm.key: mm.continuous_batching
                     for mm in load_fleet_state(s, include_declared=True).models}  # fmt: skip
    finally:
        engine.dispose()
    expected = {
        "minilm-embed:1": False,
        "minilm-rerank:1": False,
        "smollm2-135m:1": False,
        "llama-70b:1": True,
    }
    assert stored == expected
    assert specs == expected
    assert {d.key: d.continuous_batching for d in DEMO_MODELS} == expected
