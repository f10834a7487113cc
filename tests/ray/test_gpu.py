"""Ray device actors on a GPU (issue 23): with a CUDA device, the executor's local Ray head sees
it, makes ``cuda:0`` an actor holding ``num_gpus=1``, and a real model (tiny BERT embed, tiny
GPT-2 generate) loads and runs there. Skipped without a GPU (the project's ``gpu`` marker)."""

from __future__ import annotations

import pytest
import torch

from control.executor.protocol import Batch, BatchItem, GenParams, ModelRef, StepKey
from control.executor.ray import RayExecutor, RayExecutorConfig
from control.executor.ray.cluster import RaySettings
from tests.executor.conftest import all_done, completions
from tests.ray.conftest import ray, wait_until

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.ray,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def test_gpu_actor_runs_a_real_model_on_cuda(model_cache):
    assert not ray.is_initialized()
    ex = RayExecutor(RayExecutorConfig(ray=RaySettings(num_cpus=2), cache_dir=str(model_cache)))
    ex.start()
    try:
        assert ex.wait_ready(180), "actors did not start"
        cuda = [d for d in ex.devices() if d.kind == "cuda"]
        assert cuda and cuda[0].device_id == "cuda:0" and cuda[0].memory_budget_mib > 0
        assert ray.available_resources().get("GPU", 0) == 0  # each GPU held by its actor
        embed = ex.load("e", ModelRef("b", "embed", "tiny", "bert"), "cuda:0").result(180)
        gen = ex.load("g", ModelRef("g", "generate", "tiny", "gpt2"), "cuda:0").result(180)
        assert embed.ok and gen.ok, (embed.reason, gen.reason)
        ex.submit(Batch("b1", "e", (BatchItem(StepKey("r", "e"), "k1", {"text": "hello"}),)))
        params = GenParams(max_tokens=4)
        ex.submit(Batch("b2", "g", (BatchItem(StepKey("r", "g"), "k2", {"prompt": "hi"}, params),)))
        done = completions(wait_until(ex, all_done(["k1", "k2"]), 120))
        assert done["k1"].ok and done["k2"].ok and done["k2"].output_tokens == 4
        status = {s.device_id: s for s in ex.heartbeat()}
        assert status["cuda:0"].used_mib > 0 and {"e", "g"} <= set(status["cuda:0"].replicas)
    finally:
        ex.stop()
