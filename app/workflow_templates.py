"""Starting points for a new workflow: blank, a two-step pipeline, RAG, and a router with
parallel branches. They name the demo seed's models (minilm-embed:1, minilm-rerank:1,
smollm2-135m:1) and its ``demo-docs`` index; the API validates them against the catalogue
when the draft is checked or saved, like any other spec."""

from __future__ import annotations

import copy
from typing import Any

EMBED, RERANK, LLM = "minilm-embed:1", "minilm-rerank:1", "smollm2-135m:1"

_PIPELINE = {
    "inputs": {"query": "text"},
    "outputs": {"answer": "answer.text"},
    "nodes": [
        {"id": "draft", "task": "generate", "model": LLM, "params": {"max_tokens": 24}},
        {"id": "answer", "task": "generate", "model": LLM, "params": {"max_tokens": 48}},
    ],
    "edges": [{"from": "input.query", "to": "draft.prompt"},
              {"from": "draft.text", "to": "answer.prompt"}],
}  # fmt: skip

_LOOKUP = [
    {"id": "embed", "task": "embed", "model": EMBED, "timeout_s": 10, "retries": 1},
    {"id": "search", "tool": "vector_search", "params": {"index": "demo-docs", "top_k": 4}},
    {"id": "rerank", "task": "rerank", "model": RERANK, "timeout_s": 10, "retries": 1},
]
_LOOKUP_EDGES = [
    {"from": "embed.embedding", "to": "search.embedding"},
    {"from": "input.query", "to": "rerank.query"},
    {"from": "search.documents", "to": "rerank.documents"},
]

_RAG = {
    "inputs": {"query": "text"},
    "outputs": {"answer": "answer.text", "documents": "rerank.documents"},
    "nodes": [*_LOOKUP, {"id": "answer", "task": "generate", "model": LLM, "timeout_s": 60,
                         "params": {"max_tokens": 48}}],
    "edges": [{"from": "input.query", "to": "embed.text"}, *_LOOKUP_EDGES,
              {"from": "input.query", "to": "answer.prompt"},
              {"from": "rerank.documents", "to": "answer.context"}],
}  # fmt: skip

# The router gates the lookup branch; the draft runs in parallel; the answer joins both.
_ROUTER = {
    "inputs": {"query": "text"},
    "outputs": {"answer": "answer.text"},
    "nodes": [
        {"id": "route", "tool": "router", "params": {
            "rules": [{"label": "lookup", "keywords": ["what", "how", "why", "?"]}],
            "default": "chat"}},
        *_LOOKUP,
        {"id": "draft", "task": "generate", "model": LLM, "params": {"max_tokens": 24}},
        {"id": "answer", "task": "generate", "model": LLM, "params": {"max_tokens": 48}},
    ],
    "edges": [{"from": "input.query", "to": "route.value"},
              {"from": "route.value", "to": "embed.text", "when": "lookup"}, *_LOOKUP_EDGES,
              {"from": "input.query", "to": "draft.prompt"},
              {"from": "draft.text", "to": "answer.prompt"},
              {"from": "rerank.documents", "to": "answer.context"}],
}  # fmt: skip

_BLANK: dict[str, Any] = {"inputs": {"query": "text"}, "outputs": {}, "nodes": [], "edges": []}

#: Template name -> spec (without the workflow name).
TEMPLATES: dict[str, dict[str, Any]] = {
    "blank": _BLANK,
    "pipeline": _PIPELINE,
    "RAG": _RAG,
    "router with parallel branches": _ROUTER,
}


def from_template(template: str, name: str) -> dict[str, Any]:
    """A fresh copy of ``template`` named ``name`` (KeyError for an unknown template)."""
    return {"workflow": name, **copy.deepcopy(TEMPLATES[template])}
