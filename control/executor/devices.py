"""Discovery of the local devices the executor runs workers on.

Each CUDA device becomes ``cuda:N`` (budget: 90% of its memory). Without CUDA the machine is
split into CPU worker slots ``cpu:0..k-1``, one per usable core unless ``cpu_slots`` says
otherwise, each pinned to its own core (see :mod:`worker`); CPU slots share the machine's
memory, so each gets an equal part of 80% of it.
"""

from __future__ import annotations

import os

from control.executor.base import DeviceInfo


def usable_cores() -> list[int]:
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def total_memory_mib() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        return 8192


def discover_devices(
    cpu_slots: int | None = None, memory_budget_mib: int | None = None, use_cuda: bool = True
) -> list[DeviceInfo]:
    """The devices of this machine. ``memory_budget_mib`` overrides every device's budget."""
    import torch

    if use_cuda and torch.cuda.is_available():
        devices = []
        for i in range(torch.cuda.device_count()):
            total = torch.cuda.get_device_properties(i).total_memory // (1024 * 1024)
            budget = memory_budget_mib or int(total * 0.9)
            devices.append(DeviceInfo(f"cuda:{i}", "cuda", i, budget))
        return devices
    cores = usable_cores()
    slots = cpu_slots or len(cores)
    if slots < 1:
        raise ValueError(f"cpu_slots must be >= 1, got {slots}")
    budget = memory_budget_mib or int(total_memory_mib() * 0.8) // slots
    return [
        DeviceInfo(f"cpu:{i}", "cpu", i, budget, cpu_core=cores[i % len(cores)])
        for i in range(slots)
    ]
