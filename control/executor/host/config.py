"""Configuration of :class:`~control.executor.host.local.LocalExecutor` (read once, at its
construction)."""

from __future__ import annotations

from dataclasses import dataclass, field

from control.executor.host.breaker import BreakerConfig

#: heartbeats a worker may miss in a row before its silence is judged (see ExecutorConfig)
DEFAULT_MISSED_HEARTBEATS = 6


@dataclass(frozen=True)
class ExecutorConfig:
    heartbeat_s: float = field(default=0.5, metadata={"help": "worker heartbeat interval"})
    missed_heartbeats: int = field(
        default=DEFAULT_MISSED_HEARTBEATS,
        metadata={
            "help": "heartbeats a worker may miss in a row before its silence is judged: on a "
            "busy machine beats come late (two missed, one second, killed live workers on two "
            "loaded cores). Even past it a silent worker is hung only with evidence: nothing "
            "of it waits unread, and its process used no CPU meanwhile (where that can be read)"
        },
    )
    hang_multiple: float = field(
        default=5.0,
        metadata={"help": "a batch running longer than this multiple of its expected time hangs"},
    )
    hang_floor_s: float = field(
        default=30.0, metadata={"help": "the shortest hang deadline of any batch (seconds)"}
    )
    cache_dir: str = field(default="var/models", metadata={"help": "converted and tiny models"})
    torch_threads: int = field(default=1, metadata={"help": "torch threads per worker"})
    cpu_slots: int | None = field(
        default=None, metadata={"help": "CPU workers; default one per core"}
    )
    memory_budget_mib: int | None = field(
        default=None, metadata={"help": "per-device budget override"}
    )
    use_cuda: bool = field(default=True, metadata={"help": "use CUDA devices when present"})
    breaker: BreakerConfig = field(
        default=BreakerConfig(), metadata={"help": "per-replica breaker"}
    )
    idempotency_capacity: int = field(
        default=100_000, metadata={"help": "completed keys remembered"}
    )
    load_silence_s: float = field(
        default=10.0,
        metadata={
            "help": "how long a worker loading a model may go without a heartbeat before it "
            "counts as hung: loading holds the interpreter in long stretches (tokenizer "
            "parsing, weight conversion) that can starve the heartbeat thread on a loaded "
            "machine; a crash is still seen at once (closed pipe, dead process)"
        },
    )
    startup_grace_s: float = field(
        default=120.0, metadata={"help": "time to a worker's first heartbeat"}
    )
    keep_host_off_worker_cores: bool = field(
        default=True,
        metadata={
            "help": "move the serving process's threads off the cores CPU workers are pinned "
            "to, when other cores remain (undone at stop)"
        },
    )
    poll_queue: bool = field(
        default=True, metadata={"help": "keep a queue for poll(); off if only events() is used"}
    )

    def __post_init__(self) -> None:
        if self.heartbeat_s <= 0:
            raise ValueError(f"ExecutorConfig.heartbeat_s must be > 0, got {self.heartbeat_s}")
        if self.missed_heartbeats < 2:
            raise ValueError(
                f"ExecutorConfig.missed_heartbeats must be >= 2, got {self.missed_heartbeats}"
            )
        if self.hang_multiple < 1:
            raise ValueError(f"ExecutorConfig.hang_multiple must be >= 1, got {self.hang_multiple}")
        if self.hang_floor_s <= 0:
            raise ValueError(f"ExecutorConfig.hang_floor_s must be > 0, got {self.hang_floor_s}")
