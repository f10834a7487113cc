"""A world for the live runtime: two CPU worker slots, tiny random models, real executor."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from control.core.assembly import CoreBlueprint
from control.core.batching.size_delay import SizeDelayConfig
from control.core.context import CoreConfig
from control.core.dag.spec import dag_from_dict
from control.core.latency import TableLatencyModel
from control.core.tenancy.base import TenancyConfig, TenantSpec
from control.core.types import ModelSpec, Request
from control.executor import sources
from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.host.breaker import BreakerConfig
from control.executor.protocol import DeviceInfo, ModelRef
from control.runtime.live import InitialReplica, LiveRuntime, RuntimeConfig
from control.runtime.local_fleet import device_specs
from control.runtime.state import IndexSpec
from control.runtime.types import RunRequest

torch.set_num_threads(1)

MAX_DELAY_S = 0.05
BERT = ModelRef("embed:1", "embed", "tiny", "bert")
REFS = {
    "embed:1": BERT,
    "rerank:1": ModelRef("rerank:1", "rerank", "tiny", "bert"),
    "gen:1": ModelRef("gen:1", "generate", "tiny", "gpt2"),
    "slow:1": ModelRef("slow:1", "noop", "tool"),  # sleeps params.busy_ms, heartbeats meanwhile
    "slow2:1": ModelRef("slow2:1", "noop", "tool"),
}
MODELS = (
    ModelSpec("embed", "1", "embed", 16, max_batch_size=8),
    ModelSpec("rerank", "1", "rerank", 16, max_batch_size=8),
    ModelSpec("gen", "1", "generate", 16, max_batch_size=4),
    ModelSpec("slow", "1", "classify", 1, max_batch_size=1),
    ModelSpec("slow2", "1", "classify", 1, max_batch_size=1),
)
DOCS = (
    "the quick brown fox jumps over the lazy dog",
    "Legato serves workflows of embedding and generation models",
    "the capital of France is Paris",
    "batching groups requests for one model",
)
RAG = {
    "workflow": "rag",
    "inputs": {"query": "text"},
    "outputs": {"answer": "gen.text", "documents": "rerank.documents"},
    "nodes": [
        {"id": "embed", "task": "embed", "model": "embed:1", "retries": 1},
        {"id": "search", "tool": "vector_search", "params": {"index": "docs", "top_k": 3}},
        {"id": "rerank", "task": "rerank", "model": "rerank:1", "retries": 1},
        {"id": "gen", "task": "generate", "model": "gen:1", "retries": 1,
         "params": {"max_tokens": 6}},
    ],
    "edges": [
        {"from": "input.query", "to": "embed.text"},
        {"from": "embed.embedding", "to": "search.embedding"},
        {"from": "input.query", "to": "rerank.query"},
        {"from": "search.documents", "to": "rerank.documents"},
        {"from": "input.query", "to": "gen.prompt"},
        {"from": "rerank.documents", "to": "gen.context"},
    ],
}  # fmt: skip
EMBED_ONLY = {
    "workflow": "embed-only",
    "inputs": {"text": "text"},
    "outputs": {"vector": "e.embedding"},
    "nodes": [{"id": "e", "task": "embed", "model": "embed:1"}],
    "edges": [{"from": "input.text", "to": "e.text"}],
}
BRANCHES = {
    "workflow": "branches",
    "inputs": {"text": "text"},
    "nodes": [
        {"id": "left", "task": "classify", "model": "slow:1", "params": {"busy_ms": 400}},
        {"id": "right", "task": "classify", "model": "slow2:1", "params": {"busy_ms": 400}},
    ],
    "edges": [
        {"from": "input.text", "to": "left.text"},
        {"from": "input.text", "to": "right.text"},
    ],
}
SLOW_ONE = {
    "workflow": "slow-one",
    "inputs": {"text": "text"},
    "nodes": [
        {
            "id": "s",
            "task": "classify",
            "model": "slow:1",
            "retries": 1,
            "params": {"busy_ms": 1500},
        }
    ],  # fmt: skip
    "edges": [{"from": "input.text", "to": "s.text"}],
}
WORKFLOWS = tuple(dag_from_dict(w) for w in (RAG, EMBED_ONLY, BRANCHES, SLOW_ONE))
PLACEMENT = (
    InitialReplica("embed:1", "cpu:0"),
    InitialReplica("rerank:1", "cpu:1"),
    InitialReplica("gen:1", "cpu:1"),
    InitialReplica("slow:1", "cpu:0"),
    InitialReplica("slow:1", "cpu:1"),
    InitialReplica("slow2:1", "cpu:1"),
)
_ids = itertools.count()


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("models")
    for arch in ("gpt2", "bert"):
        sources.ensure_tiny(arch, cache)
    return cache


def make_runtime(
    cache: Path, workflows=WORKFLOWS, breaker: BreakerConfig = BreakerConfig(), **options
) -> LiveRuntime:  # noqa: ANN001, ANN003
    """The test runtime on two CPU workers; ``options`` go to ``LiveRuntime`` as keywords
    (``on_rollout``, ``clock``); ``breaker``: the executor's per-replica breakers."""
    devices = [DeviceInfo(f"cpu:{i}", "cpu", i, 512, i % 2) for i in range(2)]
    executor = LocalExecutor(
        ExecutorConfig(heartbeat_s=0.5, cache_dir=str(cache), use_cuda=False, poll_queue=False,
                       breaker=breaker),
        devices,
    )  # fmt: skip
    blueprint = CoreBlueprint(
        devices=device_specs(devices),
        models=MODELS,
        workflows=workflows,
        tenancy=TenancyConfig(tenants=(TenantSpec("t1", 1),)),
        core_config=CoreConfig(batching_config=SizeDelayConfig(max_queue_delay_s=MAX_DELAY_S)),
    )
    config = RuntimeConfig(indexes=(IndexSpec("docs", DOCS, BERT),), sample_every_s=0.2)
    return LiveRuntime(
        blueprint,
        TableLatencyModel(),
        executor,
        REFS,
        PLACEMENT,
        config,
        **options,
    )


def run_request(workflow: str, **payload) -> RunRequest:
    rid = f"req-{next(_ids)}"
    return RunRequest(Request(rid, "t1", workflow, prompt_tokens=8, max_output_tokens=6), payload)
