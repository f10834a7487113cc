"""Settings of the fidelity check and the names of the small world both sides run."""

from __future__ import annotations

from dataclasses import dataclass, field

MODEL_KEY = "minilm-embed:1"
DEVICE_ID = "cpu:0"
TENANT = "fidelity"
WORKFLOW = "embed-only"
#: The shipped trace slice both sides replay (``sim.traces.records.SHIPPED``).
TRACE = "azure_code"


@dataclass(frozen=True)
class FidelityConfig:
    rate_factor: float | None = field(
        default=None,
        metadata={
            "help": "trace time scaling (x faster); None: chosen from the measured table so "
            "that the slice offers ``target_utilization`` of the worker at batch size 1"
        },
    )
    target_utilization: float = field(
        default=0.5, metadata={"help": "offered load when rate_factor is None (0..1)"}
    )
    max_slice_s: float = field(
        default=20.0,
        metadata={"help": "longest span of the slice: bounds the check's wall time"},
    )
    max_gap_s: float = field(
        default=1.0, metadata={"help": "idle gaps of the trace longer than this are shortened"}
    )
    max_requests: int = field(default=120, metadata={"help": "requests of the slice"})
    token_divisor: int = field(default=16, metadata={"help": "trace prompt tokens per token"})
    min_tokens: int = field(default=8, metadata={"help": "shortest prompt sent"})
    max_tokens: int = field(default=128, metadata={"help": "longest prompt sent"})
    slo_s: float = field(default=0.1, metadata={"help": "end-to-end SLO of a request"})
    max_batch_size: int = field(default=8, metadata={"help": "the model's max batch size"})
    max_queue_delay_s: float = field(default=0.005, metadata={"help": "batching delay"})
    profile_batch_sizes: tuple[int, ...] = field(
        default=(1, 2, 4, 8), metadata={"help": "batch sizes of the in-worker profile"}
    )
    profile_tokens: tuple[int, ...] = field(
        default=(8, 32, 64, 128), metadata={"help": "prompt lengths of the in-worker profile"}
    )
    profile_idle_ratio: float = field(
        default=1.0,
        metadata={
            "help": "idle time after each profile batch, as a multiple of its time (1.0: the "
            "worker is busy half the time, as when it serves the slice at load 0.5)"
        },
    )
    profile_repeats: int = field(
        default=2,
        metadata={
            "help": "timed sweeps of the grid per profile block (a round's table is the median "
            "of the samples of the two blocks around it: several per point outvote a batch the "
            "host interrupted)"
        },
    )
    slice_repeats: int = field(
        default=10,
        metadata={
            "help": "rounds: the slice is replayed this many times, each followed by a profile "
            "block; each round's twin table pools the samples of the blocks around it, and the "
            "figures pool every round (the machine's speed moves over seconds). The live side "
            "is one sample of a random process: with 5 rounds of 120 requests its p99 and SLO "
            "attainment alone move by 7% and 2 points (80th percentile, twin draws standing in "
            "for the live runs), with 10 by 5% and 1.4"
        },
    )
    twin_draws: int = field(
        default=8,
        metadata={
            "help": "twin replays per round, differing only in the seed of the device-time "
            "scatter; the twin's figures pool them (its distribution, not one sample of it)"
        },
    )
    calibration_requests: int = field(
        default=6, metadata={"help": "warm-up requests before anything is measured"}
    )
    model_source: str = field(default="minilm", metadata={"help": "minilm, or tiny (tests)"})
    cache_dir: str = field(default="var/models", metadata={"help": "model cache folder"})
    worker_core: int = field(default=0, metadata={"help": "CPU core of the worker slot"})
    nice: int | None = field(
        default=-10,
        metadata={
            "help": "scheduling priority of the check's own threads (worker and driver) while "
            "the live side runs, so that neighbours on a shared machine do not slow it in "
            "stretches no profile sees (see fidelity.priority); None: leave priorities alone"
        },
    )
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_requests < 2:
            raise ValueError(f"FidelityConfig.max_requests={self.max_requests}: must be >= 2")
        if not 2 < self.min_tokens <= self.max_tokens <= 256:
            raise ValueError(
                f"FidelityConfig.min_tokens={self.min_tokens}, max_tokens={self.max_tokens}: "
                "need 2 < min_tokens <= max_tokens <= 256"
            )
        if self.rate_factor is not None and self.rate_factor <= 0:
            raise ValueError(f"FidelityConfig.rate_factor={self.rate_factor}: must be > 0")
        if not 0 < self.target_utilization < 1:
            raise ValueError(
                f"FidelityConfig.target_utilization={self.target_utilization}: must be in (0, 1)"
            )
        if self.max_slice_s <= 0:
            raise ValueError(f"FidelityConfig.max_slice_s={self.max_slice_s}: must be > 0")
        if self.profile_idle_ratio < 0:
            raise ValueError(f"FidelityConfig.profile_idle_ratio={self.profile_idle_ratio}: >= 0")
        if self.nice is not None and not -20 <= self.nice <= 19:
            raise ValueError(f"FidelityConfig.nice={self.nice}: must be in -20..19")
        for name in ("profile_repeats", "slice_repeats", "twin_draws"):
            if getattr(self, name) < 1:
                raise ValueError(f"FidelityConfig.{name}={getattr(self, name)}: must be >= 1")
