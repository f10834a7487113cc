"""Settings of late binding (see ``control.core.binding``)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BindingConfig:
    enabled: bool = field(
        default=True,
        metadata={
            "help": "keep ready steps unbound in a per-model queue ordered by fair share until "
            "a replica can start them; False binds each step to a replica queue when ready"
        },
    )
    max_local_batches: int = field(
        default=1,
        metadata={"help": "batches' worth of bound steps a replica's local queue may hold"},
    )
    bind_ahead_us: int = field(
        default=0,
        metadata={
            "help": "a busy replica takes its next batch of pending work when its batch in "
            "flight (or its load) is predicted to end within this many microseconds; checked "
            "whenever the core steps, including right after it dispatches (hides dispatch "
            "latency). 0: only free replicas take work"
        },
    )

    def __post_init__(self) -> None:
        if self.max_local_batches < 1:
            raise ValueError(f"max_local_batches must be >= 1, got {self.max_local_batches}")
        if self.bind_ahead_us < 0:
            raise ValueError(f"bind_ahead_us must be >= 0, got {self.bind_ahead_us}")
