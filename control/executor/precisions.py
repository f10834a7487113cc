"""Which precisions an executor device runs, without importing torch (the seed and the device
registrar list them for a device; :mod:`control.executor.precision` converts models to them)."""

from __future__ import annotations

#: The precisions an executor can convert a float32 model to (``fp32``: untouched).
RUNNABLE = ("fp32", "bf16", "fp16", "int8", "int4")


def runnable_on(kind: str) -> list[str]:
    """The precisions a device of ``kind`` (``cuda`` or ``cpu``) runs, as the device registry
    lists them: int4 needs CUDA (torchao's kernels), and fp16 on a CPU is slower than fp32."""
    return [p for p in RUNNABLE if kind == "cuda" or p not in ("int4", "fp16")]
