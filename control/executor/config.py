"""Configuration and bookkeeping records of :class:`~control.executor.local.LocalExecutor`."""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field
from pathlib import Path

from control.executor import sources
from control.executor.base import Batch, ModelRef
from control.executor.breaker import BreakerConfig


@dataclass(frozen=True)
class ExecutorConfig:
    heartbeat_s: float = field(
        default=0.5, metadata={"help": "worker heartbeat interval; down after two missed"}
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
        if self.hang_multiple < 1:
            raise ValueError(f"ExecutorConfig.hang_multiple must be >= 1, got {self.hang_multiple}")
        if self.hang_floor_s <= 0:
            raise ValueError(f"ExecutorConfig.hang_floor_s must be > 0, got {self.hang_floor_s}")


@dataclass
class _PendingLoad:
    future: concurrent.futures.Future
    replica_id: str
    device_id: str
    ref: ModelRef
    evicted: tuple[str, ...]


@dataclass
class _ParkedBatch:
    """A batch waiting for inputs to arrive from other workers."""

    device_id: str
    batch: Batch
    waiting: set[str]
    moved: dict[tuple[str, str, str], object] = field(default_factory=dict)


def estimate_mib(ref: ModelRef, cache_dir: Path) -> int:
    """Planned MiB of a model from the weights already on disk (0 when not there yet)."""
    if ref.source in ("minilm", "hf"):
        return sources.estimate_mib(sources.resolve(ref, cache_dir))
    if ref.source == "smollm2":
        return sources.estimate_mib(cache_dir / "smollm2-135m-instruct")
    if ref.source == "tiny":
        return sources.estimate_mib(cache_dir / "tiny" / (ref.path or "gpt2"))
    return 0
