"""Table latency model: exact at measured points, bilinear between, clamped outside."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control.core.latency import DecodeRow, FallbackProfile, LatencyRow, LoadRow, TableLatencyModel

ROWS = [
    LatencyRow("m", "gpu", 1, 100, 1000),
    LatencyRow("m", "gpu", 1, 300, 3000),
    LatencyRow("m", "gpu", 4, 100, 2000),
    LatencyRow("m", "gpu", 4, 300, 6000),
]
LAT = TableLatencyModel(ROWS, [DecodeRow("m", "gpu", 500, 100)], [LoadRow("m", "gpu", 7000)])


@pytest.mark.parametrize(
    ("batch", "tokens", "expected"),
    [
        (1, 100, 1000),  # measured
        (4, 300, 6000),  # measured
        (1, 200, 2000),  # linear in tokens
        (4, 200, 4000),
        (2, 100, 1333),  # linear in batch: 1000 + (2000-1000)/3
        (2, 200, 2667),  # bilinear
        (8, 300, 10000),  # extrapolated along the last batch segment: 6000 + 4 * 1000
        (1, 0, 1),  # extrapolated below: 1000 - 100*10 = 0 -> clamped at >= 1 us
    ],
)
def test_forward_interpolation(batch: int, tokens: int, expected: int) -> None:
    assert LAT.forward_us("m", "gpu", batch, tokens) == expected


def test_decode_and_load_and_fallback() -> None:
    assert LAT.decode_us("m", "gpu", 4, 10) == 10 * (500 + 4 * 100)
    assert LAT.load_us("m", "gpu") == 7000
    assert LAT.load_us("m", "cpu") is None
    fb = FallbackProfile()
    assert LAT.forward_us("other", "gpu", 2, 10) == fb.fixed_us + fb.per_token_us * 20


def test_misuse_names_the_value() -> None:
    with pytest.raises(ValueError, match="batch_size=0"):
        LAT.forward_us("m", "gpu", 0, 10)


@given(st.integers(1, 64), st.integers(0, 4000), st.integers(0, 63), st.integers(0, 4000))
def test_never_decreases_as_work_grows(b: int, t: int, db: int, dt: int) -> None:
    assert LAT.forward_us("m", "gpu", b + db, t + dt) >= LAT.forward_us("m", "gpu", b, t) >= 1
