"""The Ray cluster as the executor sees it: connecting, its devices, and the device actors.

:func:`connect` joins the cluster at an address, or starts a local Ray head when none is given
(usage stats off; the object store capped). :func:`cluster_devices` reads Ray's view of the
alive nodes and makes one device per GPU (``num_gpus=1``) and, on a node without GPUs, one per
CPU slot (``num_cpus=1``, one torch thread). The driver's own node keeps the local executor's
device ids (``cpu:0``, ``cuda:0``: a fleet declared for this machine matches either backend);
a device of another node is named ``<node id prefix>/cpu:0``. Each device carries its node (a
topology domain) and labels: the node's address and, for a GPU, its type and its NVLink domain
(``nvlink``: one per node, shared by the node's GPUs; the core's interconnect group).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from control.executor.protocol import DeviceInfo
from control.executor.ray.actor import CONCURRENCY_GROUPS, DeviceActor

#: characters of a node id that name its devices
NODE_PREFIX = 8
#: the label naming a GPU's NVLink domain (the GPUs of one node share it)
NVLINK_LABEL = "nvlink"
#: the part of a CPU node's memory shared by its slots' budgets (as the local executor's 80%)
CPU_MEMORY_SHARE = 0.8
#: the part of a GPU's memory its replicas may use (as the local executor's 90%)
GPU_MEMORY_SHARE = 0.9


@dataclass(frozen=True)
class RaySettings:
    address: str | None = None  # None: start a local head
    num_cpus: int | None = None  # a local head's CPUs (None: Ray's own count)
    object_store_mib: int = 256  # a local head's object store
    gpu_memory_mib: int = 0  # a GPU's memory when Ray's view does not say (0: ask the GPU)


def connect(settings: RaySettings) -> bool:
    """Join (or start) the cluster unless this process is already connected; True when this
    call connected (the executor then disconnects at stop)."""
    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # ray.init replaces this process's SIGTERM handler with a bare exit: keep the server's
    # (uvicorn's drains and stops the executor)
    sigterm = signal.getsignal(signal.SIGTERM)
    if settings.address:
        ray.init(address=settings.address, log_to_driver=False)
    else:
        ray.init(num_cpus=settings.num_cpus, include_dashboard=False, log_to_driver=False,
                 object_store_memory=settings.object_store_mib * 1024 * 1024)  # fmt: skip
    if threading.current_thread() is threading.main_thread() and sigterm is not None:
        signal.signal(signal.SIGTERM, sigterm)
    return True


@dataclass(frozen=True)
class Placement:
    """Where a device's actor goes: its node and the resources it holds there."""

    node_id: str
    num_cpus: float
    num_gpus: float


def cluster_devices(
    nodes: list[Mapping[str, Any]], driver_node: str, gpu_memory_mib: int = 0
) -> list[tuple[DeviceInfo, Placement]]:
    """Devices of the alive ``nodes`` (as ``ray.nodes()`` lists them), the driver's node
    first, then by node id."""
    alive = sorted((n for n in nodes if n.get("Alive")),
                   key=lambda n: (n["NodeID"] != driver_node, n["NodeID"]))  # fmt: skip
    out = []
    for node in alive:
        node_id, res = node["NodeID"], node.get("Resources", {})
        prefix = "" if node_id == driver_node else node_id[:NODE_PREFIX] + "/"
        address = ("address", str(node.get("NodeManagerAddress", "")))
        gpus = int(res.get("GPU", 0))
        if gpus:
            gpu_type = next((k.split(":", 1)[1] for k in res if k.startswith("accelerator_type:")),
                            "unknown")  # fmt: skip
            budget = int(gpu_memory_mib * GPU_MEMORY_SHARE)
            labels = (address, ("gpu_type", gpu_type),
                      (NVLINK_LABEL, f"nvlink:{node_id[:NODE_PREFIX]}"))  # fmt: skip
            for i in range(gpus):
                info = DeviceInfo(f"{prefix}cuda:{i}", "cuda", i, budget, node=node_id,
                                  labels=labels)  # fmt: skip
                out.append((info, Placement(node_id, 0.0, 1.0)))
            continue
        slots = int(res.get("CPU", 0))
        memory_mib = int(res.get("memory", 0)) // (1024 * 1024)
        budget = int(memory_mib * CPU_MEMORY_SHARE) // max(slots, 1)
        for i in range(slots):
            info = DeviceInfo(f"{prefix}cpu:{i}", "cpu", i, budget, node=node_id,
                              labels=(address,))  # fmt: skip
            out.append((info, Placement(node_id, 1.0, 0.0)))
    return out


def gpu_memory_mib(node_id: str) -> int:
    """The memory of a GPU of ``node_id``, asked of the GPU itself (blocks; 0 when unknown)."""
    probe = ray.remote(num_gpus=1, num_cpus=0)(_gpu_memory).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
    )
    try:
        return int(ray.get(probe.remote(), timeout=120))
    except Exception:  # noqa: BLE001 (no GPU free to ask, or the node went)
        return 0


def _gpu_memory() -> int:
    import torch

    return torch.cuda.get_device_properties(0).total_memory // (1024 * 1024)


_ACTOR_CLASS: Any = None


def start_actor(device: DeviceInfo, place: Placement, options: Mapping[str, Any]) -> Any:
    """A fresh actor for ``device`` on its node (never elsewhere: ``soft=False``).
    ``options``: cache_dir, torch_threads, max_held."""
    global _ACTOR_CLASS
    if _ACTOR_CLASS is None:
        _ACTOR_CLASS = ray.remote(concurrency_groups=CONCURRENCY_GROUPS)(DeviceActor)
    strategy = NodeAffinitySchedulingStrategy(place.node_id, soft=False)
    return _ACTOR_CLASS.options(
        num_cpus=place.num_cpus, num_gpus=place.num_gpus, max_restarts=0,
        scheduling_strategy=strategy,
    ).remote(device, options["cache_dir"], options["torch_threads"], options["max_held"])  # fmt: skip


def node_alive(node_id: str) -> bool:
    return any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes())


def driver_node() -> str:
    return ray.get_runtime_context().get_node_id()


def actor_id(actor: Any) -> str:
    return actor._actor_id.hex()
