"""Small random LoRA adapters for tests and benchmarks, saved as PEFT folders.

PEFT initialises ``lora_B`` to zeros (an adapter that changes nothing); here both factors are
drawn from a seeded generator, so each adapter really changes the model's output and two seeds
give two different adapters.
"""

from __future__ import annotations

from pathlib import Path

import torch

#: the attention and MLP projections of each family the tests use
TARGETS = {"gpt2": ("c_attn", "c_fc"), "llama": ("q_proj", "v_proj", "up_proj")}


def make_adapter(
    base_folder: Path, out: Path, seed: int, rank: int = 4, scale: float = 0.5
) -> Path:
    """A LoRA adapter of rank ``rank`` on the causal LM at ``base_folder``, saved to ``out``."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_folder, dtype=torch.float32)
    targets = TARGETS["gpt2" if base.config.model_type == "gpt2" else "llama"]
    config = LoraConfig(r=rank, lora_alpha=rank, target_modules=list(targets), lora_dropout=0.0)
    model = get_peft_model(base, config)
    gen = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():
        if "lora_" in name:
            param.data = torch.randn(param.shape, generator=gen) * scale
    model.save_pretrained(out)
    return out
