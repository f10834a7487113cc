"""The executor the settings select, and what the core learns from measuring it.

:func:`measured_transfer` (:func:`with_measured_transfer` over the gateway's options): on the
Ray executor the core's cost of an input crossing nodes (``TransferCosts.other_node_us``) is the
one measured on this cluster by ``python bench/ray_executor.py --calibrate``
(``<var_dir>/calibration/ray_transfer.json``), not the assumed default; without a calibration
the default stays and a warning says so.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from control.config import Settings
from control.core.context import CoreConfig
from control.executor.host import ExecutorConfig, LocalExecutor
from control.executor.host.breaker import BreakerConfig
from control.executor.host.devices import discover_devices
from control.executor.protocol import DeviceInfo, Executor
from control.wiring.live import LiveOptions

log = logging.getLogger(__name__)
#: where ``bench/ray_executor.py --calibrate`` writes the measured transfer, under var_dir
TRANSFER_CALIBRATION = Path("calibration") / "ray_transfer.json"


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
        missed_heartbeats=settings.ray_missed_heartbeats,
        **batch_faults(settings),
    )
    return RayExecutor(config)


def batch_faults(settings: Settings) -> dict:
    """The hang deadlines and breakers of either executor, from the settings."""
    breaker = BreakerConfig(settings.breaker_failures, settings.breaker_cooldown_s)
    return dict(hang_multiple=settings.hang_multiple, hang_floor_s=settings.hang_floor_s,
                breaker=breaker)  # fmt: skip


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
        **batch_faults(settings),
    )
    return LocalExecutor(config, found)


def with_measured_transfer(options: LiveOptions, settings: Settings) -> LiveOptions:
    """``options`` with the core's cross-node transfer cost measured on the Ray cluster (the
    module doc); unchanged on the local executor (its devices share one node)."""
    core = measured_transfer(options.core_config, settings)
    return options if core is options.core_config else replace(options, core_config=core)


def measured_transfer(core: CoreConfig, settings: Settings) -> CoreConfig:
    """``core`` with the cross-node transfer cost measured on the Ray cluster (the module
    doc); ``core`` itself on the local executor or without a calibration (then with a
    warning)."""
    if settings.executor != "ray":
        return core
    path = settings.var_dir / TRANSFER_CALIBRATION
    try:
        measured = int(json.loads(path.read_text())["other_node_us"])
    except (OSError, ValueError, KeyError, TypeError):
        log.warning("no transfer calibration at %s: the core assumes %d us per cross-node "
                    "input (run python bench/ray_executor.py --calibrate)", path,
                    core.transfer.other_node_us)  # fmt: skip
        return core
    transfer = replace(core.transfer, other_node_us=max(0, measured))
    return replace(core, transfer=transfer)
