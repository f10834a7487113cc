"""Quality of a precision variant against its base model, on fixed inputs.

:func:`measure_quality` runs the base adapter (fp32) and the variant's adapter on the same fixed
inputs (:mod:`control.executor.quality_inputs`) through the adapters' own ``run`` (the code the
workers run) and returns the issue-27 quality JSON::

    {"metric": ..., "score": float, "mean": float, "min": float | None, "inputs": int, ...}

``score`` is the one figure a quality floor is compared with. Per task:

* embed, ``cosine``: cosine of each variant vector with the base vector of the same text;
  score = mean over the 64 texts, min = the worst text.
* rerank, ``ranking_agreement``: per query, the fraction of document pairs the variant orders
  as the base does (Kendall-style concordance; a pair tied in exactly one of the two counts as
  disagreeing); score = mean over the 8 queries, min = the worst query.
* generate, ``token_agreement``: greedy decoding (temperature 0) of 16 prompts, 16 tokens each.
  Per prompt: the fraction of positions (over the longer of the two outputs) where the
  variant's token equals the base's, counted only up to the first divergence: every position
  from the first differing token on counts as disagreeing, since after it the variant decodes
  from a different context. Tokens are the generated texts re-encoded by the model's tokenizer
  (the adapter returns text). score = mean over prompts, min = the worst prompt.
* classify, ``label_agreement``: fraction of the 64 texts given the base's label; min is None.

Deterministic: fixed inputs, greedy decoding, no sampling anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from control import clock
from control.executor import quality_inputs as qi
from control.executor.adapters.base import PreparedItem
from control.executor.protocol import BatchItem, ExecutorError, GenParams, StepKey

GENERATE_TOKENS = 16
_BATCH = 16


class QuietContext:
    """A run context that streams nothing and never ticks (quality runs, benchmarks)."""

    def __init__(self) -> None:
        self.started = clock.perf_counter()

    def tick(self) -> None:
        pass

    def emit_delta(self, item: Any, index: int, text: str) -> None:
        pass

    def elapsed_ms(self) -> float:
        return (clock.perf_counter() - self.started) * 1000.0


def measure_quality(task: str, base: Any, variant: Any) -> dict[str, Any]:
    """The quality JSON of adapter ``variant`` against adapter ``base`` (same model, same task);
    ExecutorError for a task without a quality metric."""
    if task == "embed":
        inputs = [{"text": t} for t in qi.texts()]
        return cosine_quality(_values(base, inputs, "vector"), _values(variant, inputs, "vector"))
    if task == "rerank":
        inputs = [{"query": q, "documents": d} for q, d in qi.rerank_queries()]
        return ranking_quality(_values(base, inputs, "scores"), _values(variant, inputs, "scores"))
    if task == "classify":
        inputs = [{"text": t} for t in qi.texts()]
        return label_quality(_values(base, inputs, "label"), _values(variant, inputs, "label"))
    if task == "generate":
        inputs = [{"prompt": p} for p in qi.prompts()]
        params = GenParams(max_tokens=GENERATE_TOKENS, temperature=0.0)
        return token_quality(
            _tokens(base, _values(base, inputs, "text", params)),
            _tokens(variant, _values(variant, inputs, "text", params)),
        )
    raise ExecutorError(f"task {task!r} has no quality metric")


def _values(adapter: Any, inputs: list[dict], key: str, params: GenParams | None = None) -> list:
    """``key`` of every output of ``adapter`` on ``inputs``, run in batches of 16."""
    params = params or GenParams()
    out: list = []
    for lo in range(0, len(inputs), _BATCH):
        items = [
            PreparedItem(BatchItem(StepKey("quality", str(i)), f"q{i}", {}, params), dict(x))
            for i, x in enumerate(inputs[lo : lo + _BATCH], start=lo)
        ]
        for o in adapter.run(items, QuietContext()):
            if o.error:
                raise ExecutorError(f"quality input failed: {o.error}")
            out.append(o.value[key])
    return out


def _tokens(adapter: Any, texts: list[str]) -> list[list[int]]:
    return [list(adapter.tokenizer(t, add_special_tokens=False).input_ids) for t in texts]


def _result(metric: str, per_input: Sequence[float], with_min: bool = True, **extra: Any) -> dict:
    mean = sum(per_input) / len(per_input) if per_input else 0.0
    low = min(per_input) if per_input and with_min else None
    return {"metric": metric, "score": mean, "mean": mean, "min": low,
            "inputs": len(per_input), **extra}  # fmt: skip


def cosine_quality(base: Sequence[Any], variant: Sequence[Any]) -> dict[str, Any]:
    """Cosine of each pair of vectors (tensors or lists), as the quality JSON."""
    import torch

    sims = []
    for a, b in zip(base, variant, strict=True):
        ta, tb = torch.as_tensor(a, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32)
        sim = float(torch.nn.functional.cosine_similarity(ta, tb, dim=0))
        sims.append(max(-1.0, min(1.0, sim)))  # rounding can pass 1 by an ulp
    return _result("cosine", sims)


def ranking_quality(base: Sequence[Sequence[float]], variant: Sequence[Sequence[float]]) -> dict:
    """Pairwise order agreement of each query's document scores, as the quality JSON."""
    per_query = []
    for a, b in zip(base, variant, strict=True):
        pairs = [(i, j) for i in range(len(a)) for j in range(i + 1, len(a))]
        same = sum(_sign(a[i] - a[j]) == _sign(b[i] - b[j]) for i, j in pairs)
        per_query.append(same / len(pairs) if pairs else 1.0)
    return _result("ranking_agreement", per_query)


def token_quality(base: Sequence[Sequence[int]], variant: Sequence[Sequence[int]]) -> dict:
    """Greedy token agreement up to the first divergence (see the module docstring)."""
    per_prompt = []
    for a, b in zip(base, variant, strict=True):
        longest = max(len(a), len(b))
        agree = 0
        while agree < min(len(a), len(b)) and a[agree] == b[agree]:
            agree += 1
        per_prompt.append(agree / longest if longest else 1.0)
    exact = sum(1 for p in per_prompt if p == 1.0)
    return _result("token_agreement", per_prompt, tokens=GENERATE_TOKENS, identical=exact)


def label_quality(base: Sequence[str], variant: Sequence[str]) -> dict[str, Any]:
    """Fraction of inputs with the base's label, as the quality JSON (min is None)."""
    same = [1.0 if a == b else 0.0 for a, b in zip(base, variant, strict=True)]
    return _result("label_agreement", same, with_min=False)


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)
