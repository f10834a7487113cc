"""The one record every trace reader produces, and transformations over lists of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

DATA_DIR = Path(__file__).with_name("data")

#: Shipped slices by short name (see data/README.md for origin and license).
SHIPPED = {
    "azure_code": DATA_DIR / "azure_code_2023_slice.csv",
    "mooncake_conversation": DATA_DIR / "mooncake_conversation_slice.jsonl",
}


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace.

    ``arrival_s`` counts from the trace's first request. ``block_hashes`` are prefix-cache block
    ids (Mooncake: one per 512 prompt tokens; equal ids at equal positions = a shared prefix);
    empty when the trace has none. ``tenant`` and ``session`` are set by readers whose trace names
    them, or by a tenant mapping.
    """

    arrival_s: float
    input_tokens: int
    output_tokens: int
    block_hashes: tuple[int, ...] = ()
    tenant: str | None = None
    session: str | None = None

    def __post_init__(self) -> None:
        if self.arrival_s < 0:
            raise ValueError(f"arrival_s must be >= 0, got {self.arrival_s}")
        if self.input_tokens < 0 or self.output_tokens < 0:
            raise ValueError(
                f"token counts must be >= 0, got input_tokens={self.input_tokens}, "
                f"output_tokens={self.output_tokens}"
            )


def shipped_trace_path(name: str) -> Path:
    """Path of a shipped slice by short name; raises KeyError naming the known ones."""
    try:
        return SHIPPED[name]
    except KeyError:
        raise KeyError(f"unknown shipped trace {name!r}; known: {sorted(SHIPPED)}") from None


def scale_time(requests: Sequence[TraceRequest], rate_factor: float) -> list[TraceRequest]:
    """Replay ``rate_factor`` times faster (2.0 = twice the arrival rate, half the span)."""
    if rate_factor <= 0:
        raise ValueError(f"rate_factor must be > 0, got {rate_factor}")
    return [replace(r, arrival_s=r.arrival_s / rate_factor) for r in requests]


def limit(
    requests: Sequence[TraceRequest],
    *,
    max_requests: int | None = None,
    max_span_s: float | None = None,
) -> list[TraceRequest]:
    """The leading part of a trace: at most ``max_requests``, arrivals within ``max_span_s``."""
    out = [r for r in requests if max_span_s is None or r.arrival_s <= max_span_s]
    return out[:max_requests] if max_requests is not None else out


def assign_tenants(
    requests: Sequence[TraceRequest], tenants: Sequence[str], weights: Sequence[int] | None = None
) -> list[TraceRequest]:
    """Map requests to tenants deterministically by a weighted round-robin over arrival order.

    Requests that already name a tenant keep it. Weights are integers (3, 1 = three of every four
    requests go to the first tenant).
    """
    if not tenants:
        raise ValueError("tenants must not be empty")
    weights = list(weights) if weights is not None else [1] * len(tenants)
    if len(weights) != len(tenants) or any(w <= 0 for w in weights):
        raise ValueError(f"weights must be one positive integer per tenant, got {weights}")
    cycle = [t for t, w in zip(tenants, weights, strict=True) for _ in range(w)]
    return [
        r if r.tenant is not None else replace(r, tenant=cycle[i % len(cycle)])
        for i, r in enumerate(requests)
    ]
