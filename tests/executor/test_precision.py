"""Precision variants on the executor: conversion by torch's own quantization or a dtype cast,
honest memory, float32 outputs, the generate paths, refusals, and ModelRef.precision on the
wire to a real worker."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest
import torch

from control.executor import sources
from control.executor.adapters import build_adapter
from control.executor.adapters.base import PreparedItem
from control.executor.precision import RUNNABLE, apply_precision, check_precision, state_mib
from control.executor.protocol import BatchItem, ExecutorError, GenParams, ModelRef, StepKey, wire
from control.services.variants import RUNNABLE_VARIANTS
from tests.executor.conftest import make_executor
from tests.executor.models import BERT, GPT2

CPU = torch.device("cpu")
MINILM = ModelRef("minilm", "embed", "minilm")


class Ctx:
    def tick(self) -> None:
        pass

    def emit_delta(self, item, index, text) -> None:
        pass

    def elapsed_ms(self) -> float:
        return 1.0


def items(inputs: list[dict], max_tokens: int = 6) -> list[PreparedItem]:
    params = GenParams(max_tokens=max_tokens)
    return [PreparedItem(BatchItem(StepKey("r", str(i)), f"k{i}", {}, params), x)
            for i, x in enumerate(inputs)]  # fmt: skip


def test_the_service_knows_what_the_executor_runs():
    assert set(RUNNABLE_VARIANTS) == set(RUNNABLE) - {"fp32"}


@pytest.mark.parametrize(
    ("precision", "why"),
    [("int4", "CUDA"), ("fp8", "int8 instead"), ("q4_1", "GGUF source format"), ("x9", "unknown")],
)
def test_a_precision_the_cpu_cannot_run_is_refused_before_loading(model_cache, precision, why):
    with pytest.raises(ExecutorError, match=why):
        build_adapter(replace(BERT, precision=precision), CPU, model_cache)


def test_a_tool_has_no_weights_to_convert():
    with pytest.raises(ExecutorError, match="no weights to convert"):
        build_adapter(
            ModelRef("noop", "noop", "tool", precision="bf16"), CPU, sources.DEFAULT_CACHE_DIR
        )


def test_minilm_variants_shrink_memory_and_keep_float32_vectors():
    adapters = {p: build_adapter(replace(MINILM, precision=p), CPU, sources.DEFAULT_CACHE_DIR)
                for p in ("fp32", "bf16", "int8")}  # fmt: skip
    mib = {p: a.memory_mib() for p, a in adapters.items()}
    assert mib["bf16"] <= mib["fp32"] // 2 + 1
    # int8 quantizes the linear layers only (the 45 MiB word embeddings stay fp32)
    assert mib["int8"] < mib["fp32"] * 0.75
    q = adapters["int8"].model
    assert "DynamicQuantizedLinear" in repr(q.encoder.layer[0].attention.self.query)
    # parameters() misses the packed int8 weights: state_mib must count them
    params_only = sum(t.numel() * t.element_size() for t in q.parameters()) / 2**20
    assert mib["int8"] > params_only + 10
    base = adapters["fp32"].run(items([{"text": "a cat sat on the mat"}]), Ctx())[0]
    for p in ("bf16", "int8"):
        out = adapters[p].run(items([{"text": "a cat sat on the mat"}]), Ctx())[0]
        assert out.value["vector"].dtype == torch.float32
        cos = float(torch.dot(out.value["vector"], base.value["vector"]))
        assert 0.9 < cos < 1.0


def test_gpt2_int8_quantizes_its_conv1d_layers_and_matches_the_base_closely(model_cache):
    folder = sources.ensure_tiny("gpt2", model_cache)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = torch.tensor([[5, 17, 42, 9, 3]])
    with torch.inference_mode():
        before = model(ids).logits
        q = apply_precision(model, "int8", CPU)
        after = q(ids).logits
    assert "DynamicQuantizedLinear" in repr(q.transformer.h[0].attn.c_attn)
    assert "DynamicQuantizedLinear" in repr(q.transformer.h[0].mlp.c_fc)
    assert 0 < float((before - after).abs().max()) < 0.1 * float(before.abs().max())
    assert state_mib(q) >= 1


@pytest.mark.parametrize("precision", ["bf16", "int8"])
@pytest.mark.parametrize("chunk", [0, 3])
def test_generate_variants_run_the_batched_and_chunked_paths(model_cache, precision, chunk):
    ref = replace(GPT2, precision=precision, options={"prefill_chunk_tokens": chunk})
    adapter = build_adapter(ref, CPU, model_cache)
    prompts = [{"prompt": "hello there"}, {"prompt": "a much longer prompt than the other one"}]
    outs = adapter.run(items(prompts), Ctx())
    assert all(o.error is None and o.output_tokens >= 1 for o in outs)
    # each row alone decodes the same tokens as in the batch (padding masked at any dtype)
    alone = [adapter.run(items([p]), Ctx())[0] for p in prompts]
    assert [o.value["text"] for o in outs] == [o.value["text"] for o in alone]


def test_the_precision_travels_to_a_real_worker(model_cache):
    ref = replace(BERT, name="tiny-bert-bf16", precision="int4")
    msg = pickle.loads(wire.encode((wire.LOAD, 1, "r1", ref)))  # as Connection.recv does
    assert msg[3].precision == "int4"
    ex = make_executor(model_cache, cpu_slots=1)
    try:
        device = ex.devices()[0].device_id
        failed = ex.load("r-int4", ref, device).result(timeout=60)
        assert not failed.ok and "CUDA" in failed.reason
        ok = ex.load("r-bf16", replace(ref, precision="bf16"), device).result(timeout=60)
        assert ok.ok, ok.reason
    finally:
        ex.stop()


def test_a_cpu_device_lists_what_its_executor_converts_to_and_a_cuda_device_also_int4() -> None:
    from control.executor.precisions import runnable_on

    assert runnable_on("cpu") == ["fp32", "bf16", "int8"]
    assert set(runnable_on("cuda")) == set(RUNNABLE)
    for p in runnable_on("cpu"):  # every listed precision converts on a CPU
        check_precision(p, torch.device("cpu"))
