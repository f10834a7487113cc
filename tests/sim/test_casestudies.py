"""The seed case studies (``legato sim casestudy``, ``sim.casestudy``) on small slices: the
command reports every figure, the seed's RAG layout beats the naive one on p99 and capacity and
is the only one reusing prefixes, preloading lowers the agent's latency, prompt-capped
Mooncake requests carry only their own prefix blocks, and both studies time steps from the
public GPU profiles and price moves with the named interconnects."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from control.cli import app
from control.core.types import BLOCK_TOKENS
from sim.casestudy import AGENT_SCENARIO, RAG_SCENARIO, agent_case, rag_case
from sim.scenario_io import load_scenario
from sim.workload import arrivals

FIELDS = ("rag_p99_ratio", "rag_throughput_ratio", "rag_prefix_reuse")


def test_rag_seed_layout_beats_naive_on_a_slice() -> None:
    out = rag_case(seeds=(0, 1), capacity_requests=150)  # the whole shipped slice: ~3 s
    assert out["naive"]["prefix_reuse"] == 0.0  # the naive engine recomputes every prompt
    assert 0.05 < out["rag_prefix_reuse"] < 1.0
    assert out["rag_p99_ratio"] > 1.0, out
    assert out["rag_throughput_ratio"] > 1.0, out


def test_agent_preloading_hits_and_shortens_runs() -> None:
    out = agent_case(seeds=(0,), max_requests=60)
    assert out["agent_latency_ratio"] > 1.0, out
    assert 0.5 < out["agent_preload_hit_rate"] < 1.0  # draft preloads on lookup runs miss
    assert "critical_path_gain" in out


def test_casestudy_command_reports_every_figure() -> None:
    res = CliRunner().invoke(
        app, ["sim", "casestudy", "all", "--seeds", "0", "--requests", "60",
              "--capacity-requests", "40", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    body = json.loads(res.output)
    for key in FIELDS:
        assert key in body["rag"] and key in body["notes"]
    for key in ("agent_latency_ratio", "agent_preload_hit_rate", "critical_path_gain"):
        assert key in body["agent"]
    bad = CliRunner().invoke(app, ["sim", "casestudy", "chatbot"])
    assert bad.exit_code != 0 and "rag, agent, all" in bad.output


def test_capped_prompts_carry_only_their_own_prefix_blocks() -> None:
    sc = load_scenario(RAG_SCENARIO)
    cap = sc.workload.max_input_tokens
    reqs = [a.request for a in arrivals(sc, 0)[:300]]
    assert any(r.prompt_tokens == cap for r in reqs)  # the cap bites on this slice
    for r in reqs:
        assert len(r.prefix_blocks) <= -(-r.prompt_tokens // BLOCK_TOKENS)
    assert load_scenario(AGENT_SCENARIO).core_config.scale_to_zero_idle_s


def test_case_studies_price_steps_and_moves_from_the_public_profiles() -> None:
    from control.core.routing.interconnects import INTERCONNECTS

    for path, fabric in ((RAG_SCENARIO, "h100-sxm-nvlink4-ndr400"),
                         (AGENT_SCENARIO, "l4-pcie4-roce100")):  # fmt: skip
        sc = load_scenario(path)
        timed = [s for s in sc.latency.sources if "load estimate" not in s]
        assert timed and all(("measured" in s) or ("derived" in s) for s in timed), timed
        assert sc.core_config.transfer == INTERCONNECTS[fabric]
