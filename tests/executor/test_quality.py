"""Quality of a variant against its base on the fixed inputs: the metrics themselves, a real
int8 MiniLM (close but not exact), and a deliberately broken variant that must score low."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from control.executor import quality_inputs as qi
from control.executor import sources
from control.executor.adapters import build_adapter
from control.executor.protocol import ExecutorError, ModelRef
from control.executor.quality import (
    cosine_quality,
    label_quality,
    measure_quality,
    ranking_quality,
    token_quality,
)
from tests.executor.models import GPT2

CPU = torch.device("cpu")
MINILM = ModelRef("minilm", "embed", "minilm")
KEYS = {"metric", "score", "mean", "min", "inputs"}


def test_the_fixed_inputs_are_fixed_and_sized():
    assert len(qi.texts()) == 64 and len(set(qi.texts())) == 64
    assert qi.texts() == qi.texts()
    assert len(qi.rerank_queries()) == 8 and all(len(d) == 8 for _, d in qi.rerank_queries())
    assert len(qi.prompts()) == 16


def test_metrics_on_known_answers():
    same = cosine_quality([[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 1.0]])
    assert KEYS <= same.keys() and same["score"] == pytest.approx(1.0)
    half = cosine_quality([[1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]])
    assert half["mean"] == pytest.approx(0.5) and half["min"] == pytest.approx(0.0)
    reversed_ = ranking_quality([[3, 2, 1]], [[1, 2, 3]])
    assert reversed_["score"] == 0.0 and reversed_["metric"] == "ranking_agreement"
    one_swap = ranking_quality([[3, 2, 1]], [[2, 3, 1]])
    assert one_swap["score"] == pytest.approx(2 / 3)
    # the first divergence ends agreement: positions after it count as disagreeing
    tokens = token_quality([[1, 2, 3, 4], [5, 6]], [[1, 2, 9, 4], [5, 6]])
    assert tokens["score"] == pytest.approx((2 / 4 + 1) / 2) and tokens["min"] == 0.5
    assert token_quality([[1, 2]], [[1, 2, 3, 4]])["score"] == pytest.approx(0.5)
    labels = label_quality(["a", "b", "a", "a"], ["a", "b", "b", "a"])
    assert labels["score"] == 0.75 and labels["min"] is None and labels["inputs"] == 4


def test_minilm_int8_is_close_to_the_base_but_not_exact():
    base = build_adapter(MINILM, CPU, sources.DEFAULT_CACHE_DIR)
    int8 = build_adapter(replace(MINILM, precision="int8"), CPU, sources.DEFAULT_CACHE_DIR)
    q = measure_quality("embed", base, int8)
    assert q["metric"] == "cosine" and q["inputs"] == 64
    assert 0.9 < q["min"] <= q["mean"] == q["score"] < 1.0
    assert measure_quality("embed", base, int8) == q  # deterministic
    exact = measure_quality("embed", base, base)
    assert exact["min"] == pytest.approx(1.0, abs=1e-5)


def test_a_broken_variant_scores_low():
    base = build_adapter(MINILM, CPU, sources.DEFAULT_CACHE_DIR)
    broken = build_adapter(MINILM, CPU, sources.DEFAULT_CACHE_DIR)
    torch.manual_seed(1)
    with torch.no_grad():  # scramble the attention of every layer: a "variant" gone wrong
        for layer in broken.model.encoder.layer:
            layer.attention.self.query.weight.normal_(0, 1)
            layer.output.dense.weight.normal_(0, 1)
    assert measure_quality("embed", base, broken)["score"] < 0.8


def test_generate_token_agreement_of_a_bf16_variant(model_cache):
    base = build_adapter(GPT2, CPU, model_cache)
    bf16 = build_adapter(replace(GPT2, precision="bf16"), CPU, model_cache)
    q = measure_quality("generate", base, bf16)
    assert q["metric"] == "token_agreement" and q["inputs"] == 16
    assert 0.0 <= q["min"] <= q["score"] <= 1.0
    assert measure_quality("generate", base, base)["score"] == 1.0


def test_rerank_and_classify_metrics_on_real_adapters(model_cache):
    rerank = ModelRef("tiny-rr", "rerank", "tiny", "bert")
    base = build_adapter(rerank, CPU, model_cache)
    assert measure_quality("rerank", base, base)["score"] == 1.0
    int8 = build_adapter(replace(rerank, precision="int8"), CPU, model_cache)
    assert 0.5 < measure_quality("rerank", base, int8)["score"] <= 1.0
    cls = ModelRef("tiny-cls", "classify", "tiny", "bert-cls")
    q = measure_quality("classify", build_adapter(cls, CPU, model_cache),
                        build_adapter(replace(cls, precision="bf16"), CPU, model_cache))  # fmt: skip
    assert q["metric"] == "label_agreement" and q["inputs"] == 64 and q["score"] > 0.5


def test_a_task_without_a_metric_is_refused():
    with pytest.raises(ExecutorError, match="no quality metric"):
        measure_quality("noop", None, None)
