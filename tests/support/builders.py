"""Builders for orchestration worlds: models, devices, latency tables, a ready core."""

from __future__ import annotations

import random
from collections.abc import Iterable

from control.core.context import CoreConfig
from control.core.dag.spec import DagSpec, dag_from_dict
from control.core.engine import ControlCore
from control.core.events import ReplicaLoaded, WorkflowRegistered
from control.core.latency import DecodeRow, LatencyRow, LoadRow, TableLatencyModel
from control.core.tenancy.cost import CostModel
from control.core.types import DeviceSpec, ModelSpec

EMBED = ModelSpec("minilm", "1", "embed", 100, max_batch_size=8, max_batch_tokens=4096)
RERANK = ModelSpec("rerank", "1", "rerank", 100, max_batch_size=8, max_batch_tokens=8192)
LLM = ModelSpec("smollm2", "1", "generate", 300, max_batch_size=4, max_batch_tokens=8192)
CLASSIFY = ModelSpec("cls", "1", "classify", 100, max_batch_size=8, max_batch_tokens=4096)
MODELS = (EMBED, RERANK, LLM, CLASSIFY)

RAG = {
    "workflow": "rag",
    "inputs": {"query": "text"},
    "outputs": {"answer": "llm.text"},
    "nodes": [
        {"id": "embed", "task": "embed", "model": "minilm:1"},
        {"id": "search", "tool": "vector_search", "params": {"index": "docs"}},
        {"id": "rerank", "task": "rerank", "model": "rerank:1"},
        {"id": "llm", "task": "generate", "model": "smollm2:1", "retries": 1},
    ],
    "edges": [
        {"from": "input.query", "to": "embed.text"},
        {"from": "embed.embedding", "to": "search.embedding"},
        {"from": "search.documents", "to": "rerank.documents"},
        {"from": "input.query", "to": "rerank.query"},
        {"from": "rerank.documents", "to": "llm.context"},
        {"from": "input.query", "to": "llm.prompt"},
    ],
}


def devices(
    n_hot: int, n_cold: int = 0, per_node: int = 4, mib: int = 1000, acc: str = "gpu-a"
) -> list[DeviceSpec]:
    out = []
    for i in range(n_hot + n_cold):
        pool = "hot" if i < n_hot else "cold"
        node = f"n{i // per_node}"
        out.append(
            DeviceSpec(f"d{i:03d}", node, "gpu", acc, mib, interconnect_group=node, pool=pool)
        )
    return out


def latency(models: Iterable[ModelSpec] = MODELS, acc: str = "gpu-a") -> TableLatencyModel:
    """A plausible table: forward = 1 ms + 2 us/token x batch^0.8-ish; decode 5 ms + 1 ms/seq."""
    rows, decode, loads = [], [], []
    for m in models:
        for b in (1, 2, 4, 8):
            for t in (16, 128, 512, 2048):
                rows.append(LatencyRow(m.key, acc, b, t, 1000 + 2 * t * b * 3 // 4 + 200 * b))
        decode.append(DecodeRow(m.key, acc, 5000, 1000))
        loads.append(LoadRow(m.key, acc, 500_000))
    return TableLatencyModel(rows, decode, loads)


def make_core(
    tenancy,  # noqa: ANN001
    models: Iterable[ModelSpec] = MODELS,
    devs: Iterable[DeviceSpec] = (),
    replicas: Iterable[tuple[str, str]] = (),
    workflows: Iterable[DagSpec | dict] = (),
    config: CoreConfig | None = None,
    seed: int = 0,
    lat: TableLatencyModel | None = None,
) -> ControlCore:
    """A core with models, devices, ready replicas [(model key, device id)] and workflows."""
    models = tuple(models)
    core = ControlCore(tenancy, CostModel(), lat or latency(models), config, random.Random(seed))
    core.register(models, devs)
    for i, (model_key, dev) in enumerate(replicas):
        core.ingest(ReplicaLoaded(f"r{i}", model_key, (dev,), "hot"), 0.0)
    for wf in workflows:
        spec = dag_from_dict(wf) if isinstance(wf, dict) else wf
        core.ingest(WorkflowRegistered(spec), 0.0)
    return core


def single(model: ModelSpec) -> dict:
    """A one-node workflow running ``model`` on the request text."""
    in_field = {"embed": "text", "classify": "text", "generate": "prompt", "rerank": "query"}[
        model.task
    ]
    wf = {
        "workflow": f"only-{model.name}",
        "inputs": {"text": "text"},
        "nodes": [{"id": "n", "task": model.task, "model": model.key}],
        "edges": [{"from": "input.text", "to": f"n.{in_field}"}],
    }
    if model.task == "rerank":
        wf["inputs"]["docs"] = "documents"
        wf["edges"].append({"from": "input.docs", "to": "n.documents"})
    return wf


def rng(seed: int = 0) -> random.Random:
    return random.Random(seed)
