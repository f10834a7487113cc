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

    explain: bool = field(
        default=False,
        metadata={
            "help": "score every replica of a step's model when the step is bound late "
            "without a routing choice (one room, or rooms that change no one's wait), so the "
            "request timeline shows the candidates' predicted completion; the bind is not "
            "changed. Costs a routing evaluation per such step: the live runtime turns it on, "
            "the twin leaves it off"
        },
    )

    dispatch_ahead_us: int = field(
        default=0,
        metadata={
            "help": "a replica that runs one batch at a time (not a generate model: its "
            "worker would take the batch into the running decode loop) is SENT its next batch when the "
            "batch in flight is predicted to end within this many microseconds: the executor "
            "queues it and starts it the moment the device frees, so no completion round trip "
            "leaves the device idle between batches. Only a batch of at least "
            "ahead_min_fill of the batch limit is sent ahead; at most one waits. 0: only free "
            "replicas get batches"
        },
    )
    ahead_min_fill: float = field(
        default=0.5,
        metadata={
            "help": "with dispatch ahead: the smallest batch sent ahead, as a fraction of the "
            "batch size limit in force (a batch full by tokens always goes). Below it the "
            "queue waits for the completion (or to grow): a batch much smaller than the "
            "limit pays the fixed cost of a forward for few items, and when the predicted "
            "end is too early, sending whatever is queued would alternate big and tiny "
            "batches. At or above it, sending beats waiting: the device would otherwise idle "
            "for the completion's round trip, and under load the batches grow past it by "
            "themselves (each waits behind the one running). 1.0: only full batches"
        },
    )

    def __post_init__(self) -> None:
        if self.max_local_batches < 1:
            raise ValueError(f"max_local_batches must be >= 1, got {self.max_local_batches}")
        if self.bind_ahead_us < 0:
            raise ValueError(f"bind_ahead_us must be >= 0, got {self.bind_ahead_us}")
        if self.dispatch_ahead_us < 0:
            raise ValueError(f"dispatch_ahead_us must be >= 0, got {self.dispatch_ahead_us}")
        if not 0.0 < self.ahead_min_fill <= 1.0:
            raise ValueError(f"ahead_min_fill must be in (0, 1], got {self.ahead_min_fill}")

    @property
    def take_ahead_us(self) -> int:
        """How early a busy replica takes pending work: binding ahead, or dispatching ahead
        (which needs the work bound first)."""
        return max(self.bind_ahead_us, self.dispatch_ahead_us)
