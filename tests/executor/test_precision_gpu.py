"""CUDA precision variants: torchao int8 and int4 weight-only on a real MiniLM (needs a GPU)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from control.executor import sources
from control.executor.adapters import build_adapter
from control.executor.protocol import ModelRef
from control.executor.quality import measure_quality

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
MINILM = ModelRef("minilm", "embed", "minilm")


@pytest.mark.parametrize("precision", ["bf16", "int8", "int4"])
def test_torchao_variants_shrink_and_stay_close(precision):
    cuda = torch.device("cuda:0")
    base = build_adapter(MINILM, cuda, sources.DEFAULT_CACHE_DIR)
    variant = build_adapter(replace(MINILM, precision=precision), cuda, sources.DEFAULT_CACHE_DIR)
    assert variant.memory_mib() < base.memory_mib()
    quality = measure_quality("embed", base, variant)
    assert 0.9 < quality["score"] <= 1.0
