"""Step outputs inside a worker process: held for later steps, moved to other workers without
JSON, copied plain for the driver.

:class:`HeldOutputs` keeps each finished step's output, keyed by (run id, node id), until the
host releases its run or the bound on held outputs pushes the oldest out. A tensor leaves its
worker as a named shared-memory block (:class:`~control.executor.protocol.wire.ShmTensor`, a
few bytes of metadata); the consumer worker copies it out and unlinks the block, so the data
goes worker to worker through shared memory and only the name passes through the executor's
pipes. On CUDA the consumer then moves it with ``.to(device)``. Anything else (text, lists of
scores) is small and travels pickled.
"""

from __future__ import annotations

import pickle
from collections import OrderedDict
from multiprocessing import shared_memory
from typing import Any

import numpy as np
import torch

from control.executor.protocol.wire import ShmTensor


class HeldOutputs:
    """The outputs this worker holds (main thread only; the heartbeat thread never looks)."""

    def __init__(self, max_held: int) -> None:
        self.max_held = max_held
        self._held: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()

    def get(self, run_id: str, node_id: str) -> dict[str, Any] | None:
        """The whole output of a step, or None when not held (never ran here, or dropped)."""
        return self._held.get((run_id, node_id))

    def keep(self, run_id: str, node_id: str, value: dict[str, Any]) -> None:
        """Hold a step's output for later steps; the oldest go beyond the bound."""
        self._held[(run_id, node_id)] = value
        while len(self._held) > self.max_held:
            self._held.popitem(last=False)

    def release(self, run_ids: set[str]) -> None:
        """Drop every output of these runs."""
        for key in [k for k in self._held if k[0] in run_ids]:
            del self._held[key]

    def __len__(self) -> int:
        return len(self._held)


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


def nbytes(value: Any) -> int:
    """The size of a value moved between workers: a tensor's or array's data, else its pickle
    (what crossed, or would cross, the process boundary)."""
    size = getattr(value, "nbytes", None)
    if isinstance(size, int):
        return size
    return len(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def to_plain(value: Any) -> Any:
    """A copy of an output value with tensors turned into nested lists (for the driver)."""
    if isinstance(value, torch.Tensor):
        return value.tolist()  # copies from any device, ignores autograd: no detach/cpu needed
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value
