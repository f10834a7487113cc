"""The twin charges moving a step's inputs where the live executor moves them, priced as the
core's router predicts (``TransferCosts.move_us`` over the core's byte estimate): a consumer on
another node waits exactly the predicted cross-node cost more than one on the producer's device.
"""

from __future__ import annotations

from typing import Any

import pytest

from control.core.actions import Dispatch
from control.core.routing.transfer import TransferCosts
from control.core.types import DeviceSpec, Request
from sim.driver import Arrival
from sim.runner import run_seed
from sim.scenario_io import ScenarioError, scenario_from_dict

CLS_TOKENS = 1_000  # the classify step reads the generated text: 1,000 tokens x 4 bytes
PRICING = {"same_group_us": 20, "same_node_us": 50, "other_node_us": 500, "host_us": 0,
           "same_group_mb_per_s": 10_000, "same_node_mb_per_s": 1_000,
           "other_node_mb_per_s": 100}  # fmt: skip


def _device(dev: str, node: str, group: str) -> dict:
    return {"device_id": dev, "node_id": node, "kind": "cpu", "accelerator": "cpu",
            "memory_mib": 8192, "interconnect_group": group}  # fmt: skip


def _table(model: str, decode: bool) -> dict:
    t: dict[str, Any] = {"model": model, "accelerator": "cpu",
                         "rows": [[1, 100, 10_000], [1, 1000, 20_000], [8, 1000, 90_000]]}  # fmt: skip
    if decode:
        t["decode"] = [1_000, 100]
    return t


def _scenario(cls_devices: list[str], interconnects: Any = PRICING) -> dict:
    return {
        "name": "transfer", "seeds": [0],
        "devices": [_device("a0", "a", "ga"), _device("a1", "a", "ga"),
                    _device("a2", "a", "gb"), _device("b0", "b", "gc")],
        "models": [{"name": "gen", "version": "1", "task": "generate", "memory_mib": 1024},
                   {"name": "cls", "version": "1", "task": "classify", "memory_mib": 1024}],
        "workflows": [{"workflow": "w", "inputs": {"query": "text"},
                       "outputs": {"label": "cls.label"},
                       "nodes": [{"id": "gen", "task": "generate", "model": "gen:1"},
                                 {"id": "cls", "task": "classify", "model": "cls:1",
                                  "params": {"input_tokens": CLS_TOKENS}}],
                       "edges": [{"from": "input.query", "to": "gen.prompt"},
                                 {"from": "gen.text", "to": "cls.text"}]}],
        "placement": [{"model_key": "gen:1", "device_ids": ["a0"]}]
        + [{"model_key": "cls:1", "device_ids": [d]} for d in cls_devices],
        "latency": {"tables": [_table("gen:1", True), _table("cls:1", False)]},
        "workload": {"trace": "synthetic", "workflows": {"w": 1}},
        "interconnects": interconnects,
    }  # fmt: skip


def _run(cls_devices: list[str], interconnects: Any = PRICING) -> tuple[float, list[Dispatch]]:
    sc = scenario_from_dict(_scenario(cls_devices, interconnects))
    req = Request("r0", "t", "w", prompt_tokens=100, max_output_tokens=10)
    run = run_seed(sc, 0, keep_log=True, samples=0, requests=[Arrival(1.0, req)])
    rec = run.recorder.requests["r0"]
    assert rec.status == "succeeded" and rec.end is not None
    cls = [a for _, a in run.driver.log if isinstance(a, Dispatch) and a.model_key == "cls:1"]
    return rec.end, cls


def test_a_cross_node_consumer_waits_the_predicted_cross_node_cost_more() -> None:
    costs = TransferCosts(**PRICING)
    nbytes = CLS_TOKENS * costs.text_bytes_per_token
    same_device, _ = _run(["a0"])
    src = DeviceSpec("a0", "a", "cpu", "cpu", 8192, "ga")
    for dev, node, group in (("a1", "a", "ga"), ("a2", "a", "gb"), ("b0", "b", "gc")):
        dst = DeviceSpec(dev, node, "cpu", "cpu", 8192, group)
        end, _ = _run([dev])
        assert (end - same_device) * 1e6 == pytest.approx(costs.move_us(src, dst, nbytes), abs=1)
    cross, _ = _run(["b0"])
    assert (cross - same_device) * 1e6 == pytest.approx(500 + nbytes / 100, abs=1)  # 540 us


def test_the_router_predicts_the_charge_the_twin_makes_and_picks_the_nearer_replica() -> None:
    _, dispatched = _run(["a2", "b0"])
    assert [d.device_ids for d in dispatched] == [("a2",)]
    route = dispatched[0].items[0].route
    assert route is not None
    by_replica = {c.replica_id.split("@")[1].split("#")[0]: c for c in route.candidates}
    end_a2, _ = _run(["a2"])
    end_b0, _ = _run(["b0"])
    predicted = by_replica["b0"].transfer_us - by_replica["a2"].transfer_us
    assert predicted == 540 - 54
    assert (end_b0 - end_a2) * 1e6 == pytest.approx(predicted, abs=1)


def test_without_bandwidths_the_fixed_costs_price_each_input_as_before() -> None:
    legacy = {"same_group_us": 20, "same_node_us": 50, "other_node_us": 500}
    same_device, _ = _run(["a0"], legacy)
    cross, _ = _run(["b0"], legacy)
    assert (cross - same_device) * 1e6 == pytest.approx(500, abs=1)


def test_a_named_interconnect_with_overrides_and_bad_ones() -> None:
    sc = scenario_from_dict(_scenario(["a0"], {"preset": "h100-sxm-nvlink4-ndr400",
                                               "other_node_us": 7}))  # fmt: skip
    assert sc.core_config.transfer.other_node_mb_per_s == 50_000
    assert sc.core_config.transfer.other_node_us == 7
    assert scenario_from_dict(_scenario(["a0"], "cpu-ray-local")).core_config.transfer == (
        TransferCosts(other_node_us=780)
    )
    with pytest.raises(ScenarioError, match="unknown interconnect 'nvlink9'"):
        scenario_from_dict(_scenario(["a0"], "nvlink9"))
    with pytest.raises(ScenarioError, match="other_node_mb_per_s=-1"):
        scenario_from_dict(_scenario(["a0"], {"other_node_mb_per_s": -1}))
    raw = _scenario(["a0"])
    raw["core"] = {"transfer": {"other_node_us": 1}}
    with pytest.raises(ScenarioError, match="give one of them"):
        scenario_from_dict(raw)
