"""The declared GPUs' published datasheet figures, and the one rule that moves a latency between them.

Figures are NVIDIA's datasheet numbers (dense, i.e. without structured sparsity): A100-SXM4-80GB
312 TFLOPS FP16/BF16 tensor and 2,039 GB/s HBM2e; H100-SXM5-80GB 989 TFLOPS BF16 tensor and
3,350 GB/s HBM3; L4 121 TFLOPS FP16 tensor (242 with sparsity) and 300 GB/s GDDR6.

The rule (derived, not measured; ``sim/profiles/README.md`` reports its error on the one pair of
GPUs that was measured both ways): a compute-bound phase (prefill, an encoder's forward pass)
scales with the ratio of tensor TFLOPS, a memory-bound phase (one decode iteration, which reads
every weight once) with the ratio of memory bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    key: str
    name: str
    tensor_tflops: float  # dense FP16/BF16 tensor-core peak
    memory_gb_s: float  # peak memory bandwidth
    memory_gib: float


GPUS: dict[str, GpuSpec] = {
    "a100": GpuSpec("a100", "A100-SXM4-80GB", 312.0, 2039.0, 80.0),
    "h100": GpuSpec("h100", "H100-SXM5-80GB", 989.0, 3350.0, 80.0),
    "l4": GpuSpec("l4", "L4-24GB", 121.0, 300.0, 24.0),
}


def gpu_key(name: str) -> str:
    """``a100`` | ``h100`` | ``l4`` for any spelling that starts so (``H100-80GB``, ``l4-24gb``).
    Raises ValueError naming the known GPUs otherwise."""
    low = name.strip().lower()
    for key in GPUS:
        if low.startswith(key):
            return key
    raise ValueError(f"gpu {name!r}: no public profile; known {sorted(GPUS)}")


def compute_ratio(source: str, target: str) -> float:
    """Factor turning a compute-bound time on ``source`` into one on ``target``."""
    return GPUS[source].tensor_tflops / GPUS[target].tensor_tflops


def bandwidth_ratio(source: str, target: str) -> float:
    """Factor turning a memory-bound time on ``source`` into one on ``target``."""
    return GPUS[source].memory_gb_s / GPUS[target].memory_gb_s
