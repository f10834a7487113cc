"""What moving inputs between steps costs, per tier, and what a cross-node LLM placement costs
the RAG workflow in the twin.

``moves_us``: the core's price (``TransferCosts.move_us``) of the RAG workflow's moves on each
named fabric: an embedding (1,536 bytes) and the reranked context of a 2,048-token prompt (8,192
bytes) across NVLink, PCIe, the network. ``rag``: the shipped ``rag_enterprise`` scenario
(``max_requests`` requests, seed 0) with its LLM on the embedding GPU's node (``gpu-a-1/2``,
the reranked context crosses NVLink) and on the other node (``gpu-b-0/1``, it crosses the
network), under each fabric: mean end-to-end seconds of the completed requests, and the
difference against the same-node placement beside the difference the core predicts per request
(one context move). The scenario file is read, never changed.

    python bench/twin/transfer.py [--requests 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from control import native  # noqa: E402

native.install()  # before the core is imported: the compiled core when a build is current

from control.core.routing.interconnects import interconnect  # noqa: E402
from control.core.types import DeviceSpec  # noqa: E402
from sim.runner import run_seed  # noqa: E402
from sim.scenario_io import read_scenario_dict, scenario_from_dict  # noqa: E402

FABRICS = ("h100-sxm-nvlink4-ndr400", "a100-sxm-nvlink3-hdr200", "cpu-ray-local")
EMBEDDING, CONTEXT = 1_536, 2_048 * 4
SRC = DeviceSpec("gpu-a-0", "gpu-a", "gpu", "H100-80GB", 81_559, "nvlink-a")
TIERS = {
    "same_group": DeviceSpec("gpu-a-1", "gpu-a", "gpu", "H100-80GB", 81_559, "nvlink-a"),
    "same_node": DeviceSpec("gpu-a-9", "gpu-a", "gpu", "H100-80GB", 81_559, ""),
    "other_node": DeviceSpec("gpu-b-0", "gpu-b", "gpu", "H100-80GB", 81_559, "nvlink-b"),
}


def _moves(fabric: str) -> dict[str, dict[str, int]]:
    costs = interconnect(fabric)
    return {
        tier: {"embedding": costs.move_us(SRC, dst, EMBEDDING),
               "context": costs.move_us(SRC, dst, CONTEXT)}
        for tier, dst in TIERS.items()
    }  # fmt: skip


def _mean_e2e(raw: dict, llm: list[str], fabric: str) -> float:
    raw = {**raw, "interconnects": fabric}
    raw["placement"] = [
        p if p["model_key"] != "llama-70b:1" else {**p, "device_ids": llm} for p in raw["placement"]
    ]
    run = run_seed(scenario_from_dict(raw), 0, samples=0)
    done = [r.end - r.arrival for r in run.recorder.requests.values() if r.end is not None]
    return statistics.fmean(done)


def measure(requests: int = 200) -> dict:
    raw = read_scenario_dict("rag_enterprise")
    raw.pop("variants", None)
    raw["workload"] = {**raw["workload"], "max_requests": requests}
    rag = {}
    for fabric in FABRICS:
        near = _mean_e2e(raw, ["gpu-a-1", "gpu-a-2"], fabric)
        far = _mean_e2e(raw, ["gpu-b-0", "gpu-b-1"], fabric)
        costs = interconnect(fabric)
        predicted = costs.move_us(SRC, TIERS["other_node"], CONTEXT) - costs.move_us(
            SRC, TIERS["same_group"], CONTEXT
        )
        rag[fabric] = {"same_node_e2e_s": round(near, 6), "cross_node_e2e_s": round(far, 6),
                       "cross_minus_same_us": round((far - near) * 1e6, 1),
                       "predicted_per_request_us": predicted}  # fmt: skip
    return {"moves_us": {f: _moves(f) for f in FABRICS}, "rag": rag, "requests": requests}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    print(json.dumps(measure(parser.parse_args().requests)))
