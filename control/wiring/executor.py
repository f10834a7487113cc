"""The executor on this machine's devices, from settings."""

from __future__ import annotations

from collections.abc import Sequence

from control.config import Settings
from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.host.devices import discover_devices
from control.executor.protocol import DeviceInfo, Executor


def local_devices(settings: Settings) -> list[DeviceInfo]:
    """The devices found here: ``cpu_worker_slots`` CPU workers and every CUDA device."""
    return discover_devices(settings.cpu_worker_slots, None, True)


def build_executor(settings: Settings, devices: Sequence[DeviceInfo] | None = None) -> Executor:
    """The executor the settings select: ``local`` (:func:`local_executor`) or ``ray`` (a
    ``RayExecutor`` over the cluster at ``ray_address``, else a local Ray head; its devices
    come from the cluster, so ``devices`` is ignored)."""
    if settings.executor != "ray":
        return local_executor(settings, devices)
    from control.executor.ray import RayExecutor, RayExecutorConfig, RaySettings

    config = RayExecutorConfig(
        ray=RaySettings(address=settings.ray_address),
        cache_dir=str(settings.var_dir / "models"),
        torch_threads=settings.torch_threads,
        poll_queue=False,
    )
    return RayExecutor(config)


def local_executor(
    settings: Settings, devices: Sequence[DeviceInfo] | None = None
) -> LocalExecutor:
    """A ``LocalExecutor`` (not started) over ``devices`` (default :func:`local_devices`),
    model weights cached under ``<var_dir>/models``, each worker with ``torch_threads``
    threads. Its events are read on the driver's loop, so it does not poll a queue."""
    found = list(devices) if devices is not None else local_devices(settings)
    config = ExecutorConfig(
        cache_dir=str(settings.var_dir / "models"),
        torch_threads=settings.torch_threads,
        missed_heartbeats=settings.worker_missed_heartbeats,
        poll_queue=False,
    )
    return LocalExecutor(config, found)
