"""Moving step outputs between workers without JSON.

A tensor leaves its worker as a named shared-memory block (:class:`ShmTensor`, a few bytes of
metadata); the consumer worker copies it out and unlinks the block, so the data goes worker to
worker through shared memory and only the name passes through the executor's pipes. On CUDA the
consumer then moves it with ``.to(device)``. Anything else (text, lists of scores) is small and
travels pickled.
"""

from __future__ import annotations

from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class ShmTensor:
    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy dtype string


def pack(value: Any) -> Any:
    """Make ``value`` ready to cross a process boundary (tensors into shared memory)."""
    if isinstance(value, torch.Tensor):
        array = value.detach().cpu().contiguous().numpy()
        shm = shared_memory.SharedMemory(create=True, size=max(array.nbytes, 1))
        view = np.ndarray(array.shape, dtype=array.dtype, buffer=shm.buf)
        view[...] = array
        del view
        handle = ShmTensor(shm.name, tuple(array.shape), array.dtype.str)
        shm.close()
        return handle
    return value


def unpack(value: Any, device: torch.device | None = None) -> Any:
    """Inverse of :func:`pack`: copies a shared tensor out and frees its block."""
    if not isinstance(value, ShmTensor):
        return value
    shm = shared_memory.SharedMemory(name=value.name)
    try:
        view = np.ndarray(value.shape, dtype=np.dtype(value.dtype), buffer=shm.buf)
        tensor = torch.from_numpy(view.copy())
        del view
    finally:
        shm.close()
        shm.unlink()
    return tensor.to(device) if device is not None else tensor


def to_plain(value: Any) -> Any:
    """A copy of an output value with tensors turned into nested lists (for the driver)."""
    if isinstance(value, torch.Tensor):
        return value.tolist()  # copies from any device, ignores autograd: no detach/cpu needed
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value
