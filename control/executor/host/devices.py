"""Discovery of the local devices the executor runs workers on.

Each CUDA device becomes ``cuda:N`` (budget: 90% of its memory). Without CUDA the machine is
split into CPU worker slots ``cpu:0..k-1``, one per usable core unless ``cpu_slots`` says
otherwise, each pinned to its own core (see :mod:`worker`); CPU slots share the machine's
memory, so each gets an equal part of 80% of it.

The serving process itself (gateway, driver, executor reader) keeps off the cores its CPU
workers are pinned to when other cores remain (:func:`keep_host_off_worker_cores`): a worker
woken for a batch would otherwise preempt the driver's loop thread mid-request (measured here:
the loop stalled for the whole 1.6 ms batch, often holding the interpreter lock), and a busy
loop would delay the worker.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from control.executor.protocol import DeviceInfo

log = logging.getLogger(__name__)


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


def host_cores(devices: Iterable[DeviceInfo]) -> set[int]:
    """The cores this thread may run on that no CPU worker of ``devices`` is pinned to."""
    pinned = {d.cpu_core for d in devices if d.kind == "cpu" and d.cpu_core is not None}
    return set(usable_cores()) - pinned


def pin_process(cores: Iterable[int]) -> None:
    """Restrict every thread of this process (those running now and, by inheritance, those
    started later) to ``cores``. Linux only (``/proc/self/task``); a thread that ends meanwhile
    is skipped."""
    wanted = set(cores)
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), wanted)
        except (ProcessLookupError, OSError):
            continue  # the thread ended between the listing and the call


def keep_host_off_worker_cores(devices: Iterable[DeviceInfo]) -> set[int] | None:
    """Move this process's threads onto the cores its CPU workers do not use.

    Returns the cores the calling thread could use before (give them to :func:`pin_process`
    to undo), or None when nothing changed: no affinity control here, no CPU worker pinned,
    or no core left over (every core is a worker slot; the host then shares them as before).
    """
    if not hasattr(os, "sched_setaffinity") or not os.path.isdir("/proc/self/task"):
        return None
    before = set(usable_cores())
    spare = host_cores(devices)
    if not spare or spare == before:
        return None
    pin_process(spare)
    log.info("serving threads moved to cores %s (CPU workers hold %s)", sorted(spare),
             sorted(before - spare))  # fmt: skip
    return before
