"""Encoder adapters: embed (mean pooled, L2-normalised), rerank (cross-encoder), classify.

Each runs a whole batch as one padded forward pass (the tokenizer pads to the longest item; the
attention mask keeps padding out of the result, so batched and single outputs agree).

Each loads its model as float32 and converts it to the replica's precision
(:mod:`control.executor.precision`: ``bf16``, ``int8``...). Outputs stay float32 whatever the
precision (embedding vectors, scores, probabilities), so callers never see another dtype.

Rerank on the MiniLM source builds a cross-encoder from the MiniLM backbone with a fresh
1-output head: it has the real cost profile of ms-marco-MiniLM-L-6-v2 but its scores are
MEANINGLESS. An operator with a real cross-encoder registers its folder (source ``hf``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer

from control.executor.adapters.base import (
    InputError,
    ItemOutput,
    PreparedItem,
    RunContext,
    module_mib,
    require,
    require_texts,
)
from control.executor.precision import apply_precision

log = logging.getLogger(__name__)


class EmbedAdapter:
    """Inputs ``text`` (-> ``vector``) or ``texts`` (-> ``vectors``); outputs are torch tensors."""

    task = "embed"

    def __init__(
        self, folder: Path, device: torch.device, max_length: int = 256, precision: str = "fp32"
    ) -> None:
        self.device = device
        self.max_length = max_length
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModel.from_pretrained(folder, dtype=torch.float32).to(device).eval()
        self.model = apply_precision(model, precision, device)

    def memory_mib(self) -> int:
        return module_mib(self.model)

    @torch.inference_mode()
    def encode(self, texts: Sequence[str]) -> tuple[torch.Tensor, list[int]]:
        """Normalised vectors (n, dim) on the CPU, and each text's token count."""
        enc = self.tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        mask = enc["attention_mask"]
        out = self.model(**{k: v.to(self.device) for k, v in enc.items()})
        hidden = out.last_hidden_state
        m = mask.to(hidden.device).unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1.0)
        vectors = torch.nn.functional.normalize(pooled.float(), p=2, dim=-1)
        return vectors.cpu(), [int(n) for n in mask.sum(dim=1)]

    def run(self, items: Sequence[PreparedItem], ctx: RunContext) -> list[ItemOutput]:
        texts: list[str] = []
        spans: list[tuple[int, int, bool] | InputError] = []
        for p in items:
            try:
                many = "texts" in p.inputs
                chunk = require_texts(p, "texts") if many else [require(p, "text", str)]
                spans.append((len(texts), len(texts) + len(chunk), many))
                texts.extend(chunk)
            except InputError as err:
                spans.append(err)
        vectors, counts = self.encode(texts) if texts else (torch.empty(0), [])
        outputs = []
        for span in spans:
            if isinstance(span, InputError):
                outputs.append(ItemOutput(error=str(span), field=span.field))
                continue
            lo, hi, many = span
            value = {"vectors": vectors[lo:hi]} if many else {"vector": vectors[lo]}
            outputs.append(ItemOutput(value, input_tokens=sum(counts[lo:hi]), item_count=hi - lo))
        return outputs


class RerankAdapter:
    """Inputs ``query`` and ``documents``; outputs ``scores`` (per document, input order),
    ``order`` (indices, best first) and ``documents`` (the best ``top_k``, best first)."""

    task = "rerank"

    def __init__(
        self,
        folder: Path,
        device: torch.device,
        fresh_head: bool,
        max_length: int = 256,
        precision: str = "fp32",
    ) -> None:
        self.device = device
        self.max_length = max_length
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        # A fixed seed makes the fresh head identical in every worker and every restart.
        torch.manual_seed(0)
        self.model = AutoModelForSequenceClassification.from_pretrained(
            folder, num_labels=1, dtype=torch.float32
        )
        self.model = apply_precision(self.model.to(device).eval(), precision, device)
        if fresh_head:
            log.warning(
                "rerank replica from %s uses a fresh 1-output head: real cost, meaningless scores",
                folder,
            )

    def memory_mib(self) -> int:
        return module_mib(self.model)

    @torch.inference_mode()
    def score(self, pairs: Sequence[tuple[str, str]]) -> tuple[list[float], list[int]]:
        enc = self.tokenizer(
            [q for q, _ in pairs],
            [d for _, d in pairs],
            padding=True,
            truncation=True,
            max_length=self.max_length,
            return_tensors="pt",
        )
        logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits[:, 0]
        return logits.float().cpu().tolist(), [int(n) for n in enc["attention_mask"].sum(dim=1)]

    def run(self, items: Sequence[PreparedItem], ctx: RunContext) -> list[ItemOutput]:
        pairs: list[tuple[str, str]] = []
        spans: list[tuple[int, int, list[str]] | InputError] = []
        for p in items:
            try:
                query = require(p, "query", str)
                docs = require_texts(p, "documents")
                spans.append((len(pairs), len(pairs) + len(docs), docs))
                pairs.extend((query, d) for d in docs)
            except InputError as err:
                spans.append(err)
        scores, counts = self.score(pairs) if pairs else ([], [])
        outputs = []
        for p, span in zip(items, spans, strict=True):
            if isinstance(span, InputError):
                outputs.append(ItemOutput(error=str(span), field=span.field))
                continue
            lo, hi, docs = span
            mine = scores[lo:hi]
            order = sorted(range(len(mine)), key=lambda i: (-mine[i], i))
            best = [docs[i] for i in order[: p.item.params.top_k]]
            value = {"scores": mine, "order": order, "documents": best}
            outputs.append(ItemOutput(value, input_tokens=sum(counts[lo:hi]), item_count=len(mine)))
        return outputs


class ClassifyAdapter:
    """Input ``text``; outputs ``label`` and ``probs`` (label -> probability)."""

    task = "classify"

    def __init__(
        self, folder: Path, device: torch.device, max_length: int = 256, precision: str = "fp32"
    ) -> None:
        self.device = device
        self.max_length = max_length
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
        self.model = apply_precision(model.to(device).eval(), precision, device)
        self.labels = [self.model.config.id2label[i] for i in range(self.model.config.num_labels)]

    def memory_mib(self) -> int:
        return module_mib(self.model)

    @torch.inference_mode()
    def run(self, items: Sequence[PreparedItem], ctx: RunContext) -> list[ItemOutput]:
        texts, errors = [], {}
        for i, p in enumerate(items):
            try:
                texts.append(require(p, "text", str))
            except InputError as err:
                errors[i] = err
        probs, counts = torch.empty(0), []
        if texts:
            enc = self.tokenizer(
                texts,
                padding=True,
                truncation=True,
                max_length=self.max_length,
                return_tensors="pt",
            )
            logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits
            probs = torch.softmax(logits.float(), dim=-1).cpu()
            counts = [int(n) for n in enc["attention_mask"].sum(dim=1)]
        outputs, row = [], 0
        for i in range(len(items)):
            if i in errors:
                outputs.append(ItemOutput(error=str(errors[i]), field=errors[i].field))
                continue
            dist = {label: float(probs[row, j]) for j, label in enumerate(self.labels)}
            label = self.labels[int(probs[row].argmax())]
            value = {"label": label, "probs": dist}
            outputs.append(ItemOutput(value, input_tokens=counts[row], label=label, item_count=1))
            row += 1
        return outputs
