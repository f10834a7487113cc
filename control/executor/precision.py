"""Precision variants on the executor: convert a loaded HF module to the precision it runs at.

:func:`apply_precision` is called by the adapters right after a model is loaded (as float32) and
moved to its device, before it serves anything. What each precision means:

* ``fp32``: the module as loaded, untouched.
* ``bf16``, ``fp16``: a dtype cast of the parameters and buffers (``module.to(dtype)``).
* ``int8`` on a CPU: torch's own dynamic quantization (``torch.ao.quantization.quantize_dynamic``
  of every ``nn.Linear``, fbgemm kernels): weights stored as int8, activations quantized per
  batch. GPT-2's ``Conv1D`` layers are linear maps with transposed weights; they are turned into
  ``nn.Linear`` first so that they are quantized too (otherwise most of GPT-2 stays float32).
* ``int8`` on CUDA: torchao's ``Int8WeightOnlyConfig``; ``int4``: torchao's
  ``Int4WeightOnlyConfig``, CUDA only. torchao is imported here lazily, only for CUDA.

Refused with an :class:`ExecutorError` naming why: ``int4`` on a CPU (torchao's int4 kernels need
CUDA), ``fp8`` anywhere (no maintained path for these models on the devices Legato drives;
register an ``int8`` variant instead), ``q4_1`` (the GGUF format SmolLM2 ships in, converted to
float32 when loaded: a source format, not a variant) and any unknown name.

:func:`state_mib` measures a converted module honestly: dynamic quantization packs weights into
``_packed_params`` that ``parameters()``/``buffers()`` do not list, so it sums the tensors of the
module's ``state_dict`` (packed weights, scales and biases included).
"""

from __future__ import annotations

from typing import Any

import torch

from control.executor.precisions import RUNNABLE
from control.executor.protocol import ExecutorError

_CASTS = {"bf16": torch.bfloat16, "fp16": torch.float16}
_WHY_NOT = {
    "fp8": "no maintained fp8 path for these models on Legato's devices; register int8 instead",
    "q4_1": "q4_1 is the GGUF source format (converted to fp32 when loaded), not a variant",
}


def check_precision(precision: str, device: torch.device) -> None:
    """Raise ExecutorError when ``device`` cannot run ``precision`` (the reason named)."""
    if precision in _WHY_NOT:
        raise ExecutorError(f"precision {precision!r} is not runnable: {_WHY_NOT[precision]}")
    if precision not in RUNNABLE:
        raise ExecutorError(f"precision {precision!r} is unknown; one of {RUNNABLE}")
    if precision == "int4" and device.type != "cuda":
        raise ExecutorError(
            f"precision 'int4' needs a CUDA device (torchao's int4 weight-only kernels); "
            f"this replica's device is {device.type!r}"
        )


def apply_precision(model: Any, precision: str, device: torch.device) -> Any:
    """``model`` (float32, on ``device``, in eval mode) converted to ``precision``; returns the
    module to use (dynamic quantization may return a new one). Raises ExecutorError for a
    precision ``device`` cannot run; the model is then left as it was."""
    check_precision(precision, device)
    if precision == "fp32":
        return model
    if precision in _CASTS:
        return model.to(_CASTS[precision])
    if device.type == "cuda":
        return _torchao(model, precision)
    return _dynamic_int8(model)


def _dynamic_int8(model: Any) -> Any:
    """torch's dynamic int8 quantization of every linear layer (GPT-2's Conv1D included)."""
    _conv1d_to_linear(model)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if not linears:
        raise ExecutorError("precision 'int8' quantizes linear layers; this model has none")
    # per-channel weight scales (one per output row): measured here, per-tensor scales gave
    # MiniLM a mean cosine of 0.950 (per-channel 0.978) and SmolLM2 a token agreement of 0.13
    # (per-channel 0.30)
    qconfig = torch.ao.quantization.per_channel_dynamic_qconfig
    return torch.ao.quantization.quantize_dynamic(
        model, {torch.nn.Linear: qconfig}, dtype=torch.qint8
    )


def _conv1d_to_linear(model: Any) -> None:
    """Replace transformers' ``Conv1D`` (GPT-2: ``y = x @ W + b``, W of shape (in, out)) by an
    equal ``nn.Linear`` (weight (out, in)), in place, so dynamic quantization reaches it."""
    from transformers.pytorch_utils import Conv1D

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, Conv1D):
                n_in, n_out = child.weight.shape
                linear = torch.nn.Linear(n_in, n_out, device=child.weight.device)
                with torch.no_grad():
                    linear.weight.copy_(child.weight.t())
                    linear.bias.copy_(child.bias)
                setattr(parent, name, linear)


def _torchao(model: Any, precision: str) -> Any:
    """torchao weight-only quantization on CUDA (int8 or int4), in place."""
    try:
        from torchao.quantization import (
            Int4WeightOnlyConfig,
            Int8WeightOnlyConfig,
            quantize_,
        )
    except ImportError as err:  # pragma: no cover - torchao is a pinned dependency
        raise ExecutorError(f"precision {precision!r} on CUDA needs torchao: {err}") from None
    config = Int8WeightOnlyConfig() if precision == "int8" else Int4WeightOnlyConfig()
    if precision == "int4":
        model = model.to(torch.bfloat16)  # torchao's int4 kernels take bf16 activations
    quantize_(model, config)
    return model


def state_mib(module: Any) -> int:
    """Bytes of every tensor in ``module``'s state (parameters, buffers and the packed weights
    of dynamically quantized layers), in MiB rounded up. Tensors shared by several names
    (tied embeddings) count once."""
    seen: set[int] = set()
    total = 0
    for value in module.state_dict().values():
        for tensor in _tensors(value):
            key = tensor.data_ptr() if tensor.device.type != "meta" else id(tensor)
            if key in seen:
                continue
            seen.add(key)
            total += _nbytes(tensor)
    return -(-total // (1024 * 1024))


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in one state-dict value: a tensor, or a packed-params tuple of them."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    return []


def _nbytes(tensor: torch.Tensor) -> int:
    if tensor.is_quantized:
        return tensor.numel() * tensor.element_size()
    # torchao tensor subclasses report their logical size; their packed storage is smaller
    if hasattr(tensor, "__tensor_flatten__"):
        names, _ = tensor.__tensor_flatten__()
        return sum(_nbytes(getattr(tensor, n)) for n in names)
    return tensor.numel() * tensor.element_size()
