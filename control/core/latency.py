"""Latency prediction: a Protocol and a table model built from measured profiles.

Rows come from ``legato profile`` (model, device_type, batch_size, tokens, latency_us). Forward
latency is interpolated bilinearly over (batch size, tokens); outside the measured range it is
extrapolated linearly from the outermost segment with the slope clamped at >= 0 (latency never
shrinks as work grows) and the result clamped at >= 1 us. Decode is ``fixed_us + per_seq_us x
batch`` per generated token. Pairs with no rows use a stated fallback profile, so a new model
gets a rough estimate until it is profiled. All results are integer microseconds.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from control.core.values import keeps_dict


class LatencyModel(Protocol):
    def forward_us(self, model_key: str, device_type: str, batch_size: int, tokens: int) -> int: ...

    def decode_us(
        self, model_key: str, device_type: str, batch_size: int, output_tokens: int
    ) -> int: ...

    def load_us(self, model_key: str, device_type: str) -> int | None:
        """Measured load time, or None when unmeasured (the core then uses ModelSpec.load_time_s)."""
        ...


@keeps_dict  # serialized with vars()
@dataclass(frozen=True)
class LatencyRow:
    model: str
    device_type: str
    batch_size: int
    tokens: int  # padded tokens per sequence
    latency_us: int


@keeps_dict  # serialized with vars()
@dataclass(frozen=True)
class DecodeRow:
    model: str
    device_type: str
    fixed_us: int  # per generated token, whatever the batch
    per_seq_us: int  # per generated token, per sequence in the batch


@keeps_dict  # serialized with vars()
@dataclass(frozen=True)
class LoadRow:
    model: str
    device_type: str
    load_us: int


@dataclass(frozen=True)
class FallbackProfile:
    """Used for (model, device type) pairs with no measured rows."""

    fixed_us: int = 2_000  # per forward pass
    per_token_us: int = 20  # per padded token in the batch
    decode_fixed_us: int = 20_000  # per generated token
    decode_per_seq_us: int = 1_000  # per generated token per sequence


def service_us(
    model: LatencyModel, model_key: str, device_type: str, batch: int, tokens: int, out_tokens: int
) -> int:
    """Predicted time of one batch: forward over the padded prompt plus decode."""
    fwd = model.forward_us(model_key, device_type, batch, tokens)
    return fwd + (model.decode_us(model_key, device_type, batch, out_tokens) if out_tokens else 0)


def _interp(xs: list[int], ys: list[float], x: int) -> float:
    """Piecewise-linear in x; linear extrapolation with a non-negative slope outside."""
    if len(xs) == 1:
        return ys[0]
    i = bisect_left(xs, x)
    if i < len(xs) and xs[i] == x:
        return ys[i]
    lo = min(max(i - 1, 0), len(xs) - 2)
    x0, x1, y0, y1 = xs[lo], xs[lo + 1], ys[lo], ys[lo + 1]
    slope = (y1 - y0) / (x1 - x0)
    if x < x0 or x > x1:
        slope = max(slope, 0.0)
        return y0 + slope * (x - x0) if x < x0 else y1 + slope * (x - x1)
    return y0 + slope * (x - x0)


class _Grid:
    """Measured points of one (model, device type): per batch size, sorted (tokens, us)."""

    def __init__(self, rows: list[LatencyRow]) -> None:
        per_b: dict[int, dict[int, int]] = defaultdict(dict)
        for r in rows:
            per_b[r.batch_size][r.tokens] = r.latency_us
        self.batches = sorted(per_b)
        self.curves = [
            (sorted(per_b[b]), [per_b[b][t] for t in sorted(per_b[b])]) for b in self.batches
        ]

    def at(self, batch: int, tokens: int) -> float:
        at_b = [_interp(ts, [float(v) for v in us], tokens) for ts, us in self.curves]
        return _interp(self.batches, at_b, batch)


class TableLatencyModel:
    """``LatencyModel`` over measured tables. Immutable after construction; memoizes lookups
    (a pure cache: same arguments, same answer)."""

    def __init__(
        self,
        rows: Iterable[LatencyRow] = (),
        decode: Iterable[DecodeRow] = (),
        loads: Iterable[LoadRow] = (),
        fallback: FallbackProfile | None = None,
    ) -> None:
        grouped: dict[tuple[str, str], list[LatencyRow]] = defaultdict(list)
        for r in rows:
            if r.batch_size < 1 or r.tokens < 0 or r.latency_us < 0:
                raise ValueError(
                    f"bad latency row {r!r}: batch_size >= 1, tokens and latency_us >= 0"
                )
            grouped[(r.model, r.device_type)].append(r)
        self._grids = {k: _Grid(v) for k, v in grouped.items()}
        self._decode = {(d.model, d.device_type): d for d in decode}
        self._loads = {(x.model, x.device_type): x.load_us for x in loads}
        self.fallback = fallback or FallbackProfile()
        self._cache: dict[tuple[str, str, int, int], int] = {}

    def forward_us(self, model_key: str, device_type: str, batch_size: int, tokens: int) -> int:
        if batch_size < 1 or tokens < 0:
            raise ValueError(
                f"forward_us: batch_size={batch_size} must be >= 1, tokens={tokens} >= 0"
            )
        ck = (model_key, device_type, batch_size, tokens)
        hit = self._cache.get(ck)
        if hit is not None:
            return hit
        grid = self._grids.get((model_key, device_type))
        if grid is None:
            fb = self.fallback
            value = fb.fixed_us + fb.per_token_us * batch_size * tokens
        else:
            value = max(1, round(grid.at(batch_size, tokens)))
        if len(self._cache) < 200_000:
            self._cache[ck] = value
        return value

    def decode_us(
        self, model_key: str, device_type: str, batch_size: int, output_tokens: int
    ) -> int:
        d = self._decode.get((model_key, device_type))
        fixed, per_seq = (
            (d.fixed_us, d.per_seq_us)
            if d
            else (self.fallback.decode_fixed_us, self.fallback.decode_per_seq_us)
        )
        return output_tokens * (fixed + per_seq * batch_size)

    def load_us(self, model_key: str, device_type: str) -> int | None:
        return self._loads.get((model_key, device_type))
