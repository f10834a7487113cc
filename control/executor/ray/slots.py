"""What the Ray executor knows of one device: its actor, its batches, its replicas.

A :class:`Slot` is the host-side record of a device actor, as a
:class:`~control.executor.host.handle.WorkerHandle` is of a local worker. ``generation`` counts
the actors the device has had: a reply from an actor of an earlier generation (one that died)
is ignored, so each item completes once. Batches wait in ``queue`` (where a cancel still takes
their items out) until fewer than :data:`DEPTH` run on the actor.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from control.executor.protocol import Batch, DeviceInfo
from control.executor.ray.cluster import Placement

#: batches sent to one actor at a time (the next one waits in Ray's queue, not in a round trip)
DEPTH = 2


@dataclass
class Slot:
    device: DeviceInfo
    place: Placement
    actor: Any = None
    actor_hex: str = ""
    generation: int = 0
    up: bool = False  # the actor answered since it started
    gone: bool = False  # its node left the cluster: no actor is started for it again
    pid: int | None = None
    restarts: int = 0
    last_seen: float = 0.0
    busy: bool = False
    used_mib: int = 0
    status_pending: bool = False
    queue: deque[Batch] = field(default_factory=deque)
    running: dict[str, Batch] = field(default_factory=dict)  # batch id -> batch
    replicas: dict[str, int] = field(default_factory=dict)  # replica id -> MiB

    @property
    def device_id(self) -> str:
        return self.device.device_id
