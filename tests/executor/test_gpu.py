"""CUDA checks: a worker on cuda:0 runs embed and generate and moves outputs device to device."""

from __future__ import annotations

import pytest
import torch

from control.executor.protocol import Batch, BatchItem, GenParams, ModelRef, StepKey
from tests.executor.conftest import all_done, completions, make_executor, wait_for

pytestmark = pytest.mark.gpu


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_worker_runs_embed_and_generate(model_cache):
    ex = make_executor(model_cache, use_cuda=True)
    try:
        assert ex.devices()[0].device_id == "cuda:0"
        assert ex.load("e", ModelRef("b", "embed", "tiny", "bert"), "cuda:0").result(120).ok
        assert ex.load("g", ModelRef("g", "generate", "tiny", "gpt2"), "cuda:0").result(120).ok
        ex.submit(Batch("b1", "e", (BatchItem(StepKey("r", "e"), "k1", {"text": "hello"}),)))
        ex.submit(
            Batch(
                "b2",
                "g",
                (BatchItem(StepKey("r", "g"), "k2", {"prompt": "hi"}, GenParams(max_tokens=4)),),
            )
        )
        done = completions(wait_for(ex, all_done(["k1", "k2"]), 60))
        assert done["k1"].ok and done["k2"].ok and done["k2"].output_tokens == 4
    finally:
        ex.stop()
