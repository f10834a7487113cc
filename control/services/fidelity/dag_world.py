"""The world of the whole-DAG fidelity check (``legato sim validate --workflow rag|agent``).

Two CPU worker slots as the demo fleet runs them on this machine: ``cpu:0`` serves the encoders
(MiniLM embed and the MiniLM-backbone reranker), ``cpu:1`` the generator (SmolLM2-135M, or a
tiny random GPT-2 for tests: ``model_source="tiny"``), the vector index on the host. The
workflows are the demo fleet's RAG and agent DAGs (``demo_fleet``) with the generators' output
capped at ``max_new_tokens`` so a run takes well under a second of CPU. Pure helpers: the
config, the workflow specs, the queries and the trace's arrivals (Azure or Mooncake format).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from control.core.types import ModelSpec, Request
from control.executor.protocol import DeviceInfo, ModelRef
from control.services.demo_fleet import AGENT_WORKFLOW, DEMO_DOCUMENTS, RAG_WORKFLOW
from sim.driver import Arrival
from sim.traces.azure import read_azure_csv
from sim.traces.mooncake import read_mooncake_jsonl
from sim.traces.records import SHIPPED, TraceRequest

TENANT = "fidelity"
ENCODERS, GENERATOR = "cpu:0", "cpu:1"
EMBED, RERANK, GENERATE = "minilm-embed:1", "minilm-rerank:1", "smollm2-135m:1"
INDEX = "demo-docs"
WORKFLOWS = {"rag": RAG_WORKFLOW, "agent": AGENT_WORKFLOW}
#: Words MiniLM reads as one token each; every query asks ("what"), so the agent's router
#: takes its lookup branch on both sides.
_WORDS = "what does the model do with short words and a vector for each query so search finds the text".split()  # noqa: E501


@dataclass(frozen=True)
class DagFidelityConfig:
    workflow: str = "rag"
    load: float = 0.7  # offered load, a fraction of the measured capacity of the busier device
    requests: int = 60
    trace: str = "azure_code"  # a shipped slice's name or a file
    trace_format: str | None = None  # azure | mooncake; None: from the file's suffix
    model_source: str = "real"  # real (MiniLM + SmolLM2) or tiny (random tiny models, tests)
    cache_dir: str = "var/models"
    max_new_tokens: int = 8
    min_tokens: int = 6
    max_tokens: int = 32
    token_divisor: int = 64
    calibration_sizes: tuple[int, ...] = (1, 2, 4)
    calibration_repeats: int = 2
    max_batch_size: int = 4
    max_queue_delay_s: float = 0.005
    slo_s: float = 2.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.workflow not in WORKFLOWS:
            raise ValueError(f"workflow={self.workflow!r}: one of {sorted(WORKFLOWS)} (or embed)")
        if not 0 < self.load < 1:
            raise ValueError(f"load={self.load}: must be in (0, 1)")
        if self.requests < 2:
            raise ValueError(f"requests={self.requests}: must be >= 2")
        if self.model_source not in ("real", "tiny"):
            raise ValueError(f"model_source={self.model_source!r}: real or tiny")
        if self.trace_format not in (None, "azure", "mooncake"):
            raise ValueError(f"trace_format={self.trace_format!r}: azure or mooncake")


def workflow_spec(cfg: DagFidelityConfig) -> dict[str, Any]:
    """The demo workflow with each generate step capped at ``max_new_tokens``."""
    spec = copy.deepcopy(WORKFLOWS[cfg.workflow])
    for node in spec["nodes"]:
        if node.get("task") == "generate":
            node["params"] = {**node.get("params", {}), "max_tokens": cfg.max_new_tokens}
    return spec


def model_specs(cfg: DagFidelityConfig) -> tuple[ModelSpec, ...]:
    b = cfg.max_batch_size
    return (ModelSpec("minilm-embed", "1", "embed", 128, max_batch_size=b),
            ModelSpec("minilm-rerank", "1", "rerank", 128, max_batch_size=b),
            ModelSpec("smollm2-135m", "1", "generate", 640, max_batch_size=b))  # fmt: skip


def model_refs(cfg: DagFidelityConfig) -> dict[str, ModelRef]:
    if cfg.model_source == "tiny":
        return {EMBED: ModelRef(EMBED, "embed", "tiny", "bert"),
                RERANK: ModelRef(RERANK, "rerank", "tiny", "bert"),
                GENERATE: ModelRef(GENERATE, "generate", "tiny", "gpt2")}  # fmt: skip
    return {EMBED: ModelRef(EMBED, "embed", "minilm"), RERANK: ModelRef(RERANK, "rerank", "minilm"),
            GENERATE: ModelRef(GENERATE, "generate", "smollm2")}  # fmt: skip


def index_embed(cfg: DagFidelityConfig) -> ModelRef:
    return model_refs(cfg)[EMBED]


def devices() -> list[DeviceInfo]:
    return [DeviceInfo(ENCODERS, "cpu", 0, 2048, 0), DeviceInfo(GENERATOR, "cpu", 1, 2048, 1)]


def placement() -> dict[str, str]:
    """Model key -> the device its one replica runs on."""
    return {EMBED: ENCODERS, RERANK: ENCODERS, GENERATE: GENERATOR}


def query(tokens: int, salt: int = 0) -> str:
    """A question of about ``tokens`` MiniLM tokens ([CLS]/[SEP] included)."""
    n = max(2, tokens - 2)
    return " ".join(_WORDS[(i + salt) % len(_WORDS)] if i else "what" for i in range(n))


def read_trace(cfg: DagFidelityConfig) -> tuple[str, list[TraceRequest]]:
    """(the trace's name as reported, its first ``requests`` requests)."""
    path = Path(SHIPPED.get(cfg.trace, cfg.trace))
    fmt = cfg.trace_format or ("mooncake" if path.suffix in (".jsonl", ".json") else "azure")
    if not path.is_file():
        raise ValueError(f"trace {cfg.trace!r}: no such shipped slice or file")
    reader = read_mooncake_jsonl if fmt == "mooncake" else read_azure_csv
    reqs = reader(path, max_requests=cfg.requests)
    if len(reqs) < 2:
        raise ValueError(f"trace {cfg.trace!r}: fewer than 2 requests in it")
    return (cfg.trace if cfg.trace in SHIPPED else path.name), reqs


def arrivals(
    cfg: DagFidelityConfig, reqs: list[TraceRequest], rate_rps: float, tag: str = ""
) -> list[Arrival]:
    """(Request ids ``<tag>q<i>``.) The trace's requests at mean rate ``rate_rps`` (its own burstiness kept), prompts scaled
    by ``token_divisor`` into ``min_tokens..max_tokens`` query tokens."""
    t0 = reqs[0].arrival_s
    span = max(1e-9, reqs[-1].arrival_s - t0)
    scale = (len(reqs) - 1) / rate_rps / span
    out = []
    for i, t in enumerate(reqs):
        tokens = min(cfg.max_tokens, max(cfg.min_tokens, t.input_tokens // cfg.token_divisor))
        req = Request(f"{tag}q{i}", TENANT, cfg.workflow, prompt_tokens=tokens,
                      max_output_tokens=cfg.max_new_tokens)  # fmt: skip
        out.append(Arrival((t.arrival_s - t0) * scale, req))
    return out


def documents() -> tuple[str, ...]:
    return DEMO_DOCUMENTS
