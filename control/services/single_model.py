"""One-model workflows: every OpenAI-style route runs a stored one-node workflow.

A single-model call (``/v1/embeddings``, ``/v1/chat/completions``, ...) runs the workflow
``model.<name>`` at the model's version, so it goes through the same core, admission and ledger
as any DAG. :func:`ensure_single_model_workflows` creates the missing ones (audited, actor
``gateway``); the wiring calls it before the fleet is read, because the runtime learns its
workflows at start.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from control.core.dag.spec import PORTS
from control.services import Services

ACTOR = "gateway"
SINGLE_PREFIX = "model."

#: Per task: workflow inputs, the node's input edges (workflow input -> node field), outputs.
_ONE_NODE: Mapping[str, tuple[dict[str, str], dict[str, str], dict[str, str]]] = {
    "embed": ({"text": "text"}, {"text": "text"}, {"embedding": "embedding"}),
    "generate": ({"prompt": "text"}, {"prompt": "prompt"}, {"text": "text"}),
    "rerank": (
        {"query": "text", "documents": "documents"},
        {"query": "query", "documents": "documents"},
        {"documents": "documents"},
    ),
    "classify": ({"text": "text"}, {"text": "text"}, {"label": "label"}),
}
#: Rerank returns every document in order; the route cuts ``top_n`` itself.
RERANK_ALL = 10_000


def single_model_name(model_name: str) -> str:
    """The name of the one-node workflow that serves ``model_name``."""
    return f"{SINGLE_PREFIX}{model_name}"


def single_model_spec(model_key: str, task: str) -> dict[str, Any]:
    """The one-node DAG that runs ``model_key`` on the workflow's inputs."""
    inputs, feeds, outputs = _ONE_NODE[task]
    if task == "rerank" and "scores" in PORTS["rerank"][1]:
        # Scores reach the caller only once the core declares the port (the executor's rerank
        # adapter already produces them); until then relevance_score stays null.
        outputs = {**outputs, "scores": "scores"}
    if task == "generate":  # what really ended the generation (the API's finish_reason)
        outputs = {**outputs, "finish_reason": "finish_reason"}
    node: dict[str, Any] = {"id": task, "task": task, "model": model_key}
    if task == "rerank":
        node["params"] = {"top_k": RERANK_ALL}
    return {
        "inputs": inputs,
        "outputs": {name: f"{task}.{port}" for name, port in outputs.items()},
        "nodes": [node],
        "edges": [{"from": f"input.{src}", "to": f"{task}.{dst}"} for src, dst in feeds.items()],
    }


def ensure_single_model_workflows(services: Services) -> dict[str, tuple[str, str]]:
    """Create the missing one-model workflows of every active model; returns model key ->
    (workflow name, version). Idempotent: an existing workflow is left as it is."""
    found: dict[str, tuple[str, str]] = {}
    for model in services.models.list(status="active"):
        if model.task not in _ONE_NODE:
            continue
        key = f"{model.name}:{model.version}"
        name = single_model_name(model.name)
        if services.workflows.by_name(name, model.version) is None:
            spec = single_model_spec(key, model.task)
            services.workflows.create(
                ACTOR, name=name, version=model.version, spec=spec, status="active"
            )
        found[key] = (name, model.version)
    return found
