"""The Ray executor's settings (:class:`RayExecutorConfig`)."""

from __future__ import annotations

from dataclasses import dataclass

from control.executor.host.breaker import BreakerConfig
from control.executor.host.config import ExecutorConfig
from control.executor.ray.cluster import RaySettings


@dataclass(frozen=True)
class RayExecutorConfig:
    ray: RaySettings = RaySettings()
    heartbeat_s: float = 0.5  # status call interval per actor
    cache_dir: str = "var/models"
    torch_threads: int = 1
    max_held_outputs: int = 10_000
    idempotency_capacity: int = 100_000
    poll_queue: bool = True
    #: status calls an up actor may leave unanswered before it is judged lost (:mod:`.silence`)
    missed_heartbeats: int = 2
    #: how long an actor loading a model may leave them unanswered (:mod:`.silence`)
    load_silence_s: float = 10.0
    #: a batch running longer than this multiple of its expected time hangs (as local)
    hang_multiple: float = ExecutorConfig.hang_multiple
    hang_floor_s: float = ExecutorConfig.hang_floor_s  # the shortest hang deadline (seconds)
    breaker: BreakerConfig = BreakerConfig()  # per replica

    def __post_init__(self) -> None:
        if self.heartbeat_s <= 0 or self.missed_heartbeats < 2:
            raise ValueError("RayExecutorConfig needs heartbeat_s > 0 and missed_heartbeats >= 2")
