"""Settings of the per-request choice among a model's precision variants (``variant_choice``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from control.core.variants import QUALITY_CLASSES


@dataclass(frozen=True)
class VariantChoiceConfig:
    exact_quality_floor: float = field(
        default=0.99,
        metadata={
            "help": "a variant serves 'exact' requests only when its measured quality score "
            "(against the base, fp32) is at least this; unmeasured variants never serve exact "
            "(LEGATO_EXACT_QUALITY_FLOOR)"
        },
    )
    balanced_quality_floor: float = field(
        default=0.95,
        metadata={
            "help": "'balanced' requests prefer the cheapest variant whose measured quality "
            "score is at least this (the base when none is)"
        },
    )
    degrade_wait_us: int = field(
        default=200_000,
        metadata={
            "help": "the preferred variant is saturated when its predicted queue delay "
            "exceeds this (microseconds); only then may a tenant that allows it be run on a "
            "cheaper variant"
        },
    )
    critical_quality: str = field(
        default="exact", metadata={"help": "quality class of a critical run naming none"}
    )
    standard_quality: str = field(
        default="balanced", metadata={"help": "quality class of a standard run naming none"}
    )
    batch_quality: str = field(
        default="fast", metadata={"help": "quality class of a batch run naming none"}
    )

    @property
    def class_quality(self) -> Mapping[str, str]:
        """Priority class -> quality class, when the request and its tenant name none."""
        return {"critical": self.critical_quality, "standard": self.standard_quality,
                "batch": self.batch_quality}  # fmt: skip

    def __post_init__(self) -> None:
        for name in ("exact_quality_floor", "balanced_quality_floor"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {v!r}")
        if self.degrade_wait_us < 0:
            raise ValueError(f"degrade_wait_us must be >= 0, got {self.degrade_wait_us!r}")
        for name in ("critical_quality", "standard_quality", "batch_quality"):
            if getattr(self, name) not in QUALITY_CLASSES:
                raise ValueError(f"{name} must be one of {QUALITY_CLASSES}, "
                                 f"got {getattr(self, name)!r}")  # fmt: skip
