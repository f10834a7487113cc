"""Tool steps: vector search over an in-memory index, a keyword router, and a no-op.

* ``vector_search``: at load, the replica embeds its document set (``options["documents"]``)
  with its own embed adapter (``options["embed_model"]``, default MiniLM) into a normalised
  matrix. An item gives ``query`` (text, embedded here) or ``query_vector`` (usually a reference
  to an embed step's ``vector`` output, moved here by the executor); it gets the ``top_k``
  ``documents``, their ``ids`` and cosine ``scores``.
* ``router``: ``options["rules"]`` is a list of ``[label, [keywords...]]``; the first rule with a
  keyword in the (lower-cased) ``text`` wins, else ``options["default"]``. Output ``label``.
* ``noop``: echoes its literal inputs; ``params.busy_ms`` simulates step work (see NoopAdapter).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from control import clock
from control.executor.adapters.base import (
    InputError,
    ItemOutput,
    PreparedItem,
    RunContext,
    require,
)
from control.executor.adapters.encoders import EmbedAdapter
from control.executor.router_rules import parse_router_rules, route_label


class VectorSearchAdapter:
    task = "vector_search"

    def __init__(self, embedder: EmbedAdapter, documents: Sequence[str]) -> None:
        if not documents:
            raise InputError("vector_search needs a non-empty options['documents']")
        self.embedder = embedder
        self.documents = [str(d) for d in documents]
        self.index, _ = embedder.encode(self.documents)

    def memory_mib(self) -> int:
        index_bytes = self.index.numel() * self.index.element_size()
        return self.embedder.memory_mib() + -(-index_bytes // (1024 * 1024))

    def run(self, items: Sequence[PreparedItem], ctx: RunContext) -> list[ItemOutput]:
        # Each query is checked before any is embedded: one unusable text must not fail the
        # embedding of the others.
        texts: list[str] = []
        checked: list[InputError | None] = []
        for p in items:
            try:
                if "query_vector" not in p.inputs:
                    texts.append(require(p, "query", str))
                checked.append(None)
            except InputError as err:
                checked.append(err)
        encoded, counts = self.embedder.encode(texts) if texts else (None, [])
        row, outputs = 0, []
        for p, err in zip(items, checked, strict=True):
            try:
                if err is not None:
                    raise err
                if "query_vector" in p.inputs:
                    vec = torch.as_tensor(p.inputs["query_vector"], dtype=torch.float32).flatten()
                    tokens = 0
                else:
                    vec, tokens = encoded[row], counts[row]
                    row += 1
                if vec.shape[0] != self.index.shape[1]:
                    raise InputError(
                        f"query_vector has {vec.shape[0]} dims, index has {self.index.shape[1]}",
                        "query_vector",
                    )
            except InputError as bad:
                outputs.append(ItemOutput(error=str(bad), field=bad.field))
                continue
            outputs.append(self._top(p, vec, tokens))
        return outputs

    def _top(self, p: PreparedItem, vec: torch.Tensor, tokens: int) -> ItemOutput:
        scores = self.index @ vec
        k = min(p.item.params.top_k, len(self.documents))
        top = torch.topk(scores, k)
        ids = [int(i) for i in top.indices]
        value = {
            "ids": ids,
            "documents": [self.documents[i] for i in ids],
            "scores": top.values.tolist(),
        }
        return ItemOutput(value, input_tokens=tokens, item_count=k)


class RouterAdapter:
    task = "router"

    def __init__(self, options: dict[str, Any]) -> None:
        self.rules = parse_router_rules(options.get("rules", []))
        self.default = str(options.get("default", "default"))

    def memory_mib(self) -> int:
        return 0

    def route(self, text: str) -> str:
        return route_label(text, self.rules, self.default)

    def run(self, items: Sequence[PreparedItem], ctx: RunContext) -> list[ItemOutput]:
        outputs = []
        for p in items:
            try:
                label = self.route(require(p, "text", str))
            except InputError as err:
                outputs.append(ItemOutput(error=str(err), field=err.field))
                continue
            outputs.append(ItemOutput({"label": label}, label=label, item_count=1))
        return outputs


class NoopAdapter:
    """Echoes inputs. ``params.busy_ms`` simulates step work: with ``tick`` (the default) the
    worker keeps heartbeating meanwhile; a replica loaded with ``options={"tick": False}`` holds
    the worker silently, exactly like a hung step (how tests make a worker hang). One loaded
    with ``options={"fail": "why"}`` raises in every batch, like a broken model (how tests make
    a replica fault, whatever its inputs)."""

    task = "noop"

    def __init__(self, tick: bool = True, fail: str | None = None) -> None:
        self.tick = tick
        self.fail = fail

    def memory_mib(self) -> int:
        return 0

    def run(self, items: Sequence[PreparedItem], ctx: RunContext) -> list[ItemOutput]:
        if self.fail:
            raise RuntimeError(self.fail)
        busy_s = max(p.item.params.busy_ms for p in items) / 1000.0
        if busy_s and not self.tick:
            time.sleep(busy_s)
        elif busy_s:
            deadline = clock.monotonic() + busy_s
            while (left := deadline - clock.monotonic()) > 0:
                time.sleep(min(left, 0.02))
                ctx.tick()
        return [ItemOutput(dict(p.inputs), item_count=1) for p in items]
