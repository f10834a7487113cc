"""Dynamic batching: size, padded tokens and max delay; adaptive size cap."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control.core.batching.adaptive import AdaptiveBatching, AdaptiveConfig
from control.core.batching.registry import make_batching
from control.core.batching.size_delay import SizeDelayBatching, SizeDelayConfig
from control.core.types import ModelSpec


@dataclass
class Item:
    key: str
    arrival: float
    input_tokens: int


MODEL = ModelSpec("m", "1", "embed", 10, max_batch_size=4, max_batch_tokens=1000)
POLICY = SizeDelayBatching(SizeDelayConfig(max_queue_delay_s=0.010))


def items(*tokens: int, at: float = 0.0) -> list[Item]:
    return [Item(f"k{i}", at, t) for i, t in enumerate(tokens)]


@pytest.mark.parametrize(
    ("tokens", "now", "count", "padded"),
    [
        ((10, 10), 0.005, None, None),  # not full, delay not up: wait
        ((10, 10), 0.010, 2, 20),  # delay up
        ((10,) * 6, 0.0, 4, 40),  # full by size
        ((100, 300, 200), 0.010, 3, 900),  # fits (300 x 3), sent at max delay
        ((100, 300, 200, 250), 0.0, 3, 900),  # 4th would pad to 1200 > 1000: full at 3
        ((1500, 10), 0.0, 1, 1500),  # oversized item alone
    ],
)
def test_size_delay_table(
    tokens: tuple[int, ...], now: float, count: int | None, padded: int | None
) -> None:
    formed = POLICY.form(items(*tokens), 0.0, MODEL, now)
    if count is None:
        assert formed is None
        assert POLICY.deadline(0.0, MODEL) == pytest.approx(0.010)
    else:
        assert formed is not None and (formed.count, formed.padded_tokens) == (count, padded)
        assert formed.reason


@given(st.lists(st.integers(1, 900), min_size=1, max_size=20), st.floats(0, 0.05))
def test_batches_never_exceed_limits(tokens: list[int], now: float) -> None:
    formed = POLICY.form(items(*tokens), 0.0, MODEL, now)
    if now >= 0.010:
        assert formed is not None  # never waits past max delay
    if formed is not None:
        taken = tokens[: formed.count]
        assert 1 <= formed.count <= MODEL.max_batch_size
        assert formed.padded_tokens == max(taken) * len(taken)
        assert formed.padded_tokens <= MODEL.max_batch_tokens


def test_adaptive_cap_follows_per_item_latency() -> None:
    big = ModelSpec("m", "1", "embed", 10, max_batch_size=32, max_batch_tokens=10**6)
    pol = AdaptiveBatching(AdaptiveConfig(default_target_us=40_000, max_step_up=2))
    assert pol.max_batch_size(big) == 32
    pol.observe(big, 16, 160_000)  # 10 ms per item: 4 fit in 40 ms
    assert pol.max_batch_size(big) == 4
    pol.observe(big, 4, 8_000)  # 2 ms per item: 20 would fit, grow by at most 2
    assert pol.max_batch_size(big) == 6
    for _ in range(20):
        pol.observe(big, 6, 12_000)
    assert pol.max_batch_size(big) == 20
    formed = pol.form(items(*([1] * 30)), 0.0, big, 0.0)
    assert formed is not None and formed.count == 20


def test_registry_builds_and_refuses() -> None:
    assert isinstance(make_batching("adaptive"), AdaptiveBatching)
    with pytest.raises(ValueError, match="'nope'"):
        make_batching("nope")
    with pytest.raises(TypeError, match="SizeDelayConfig"):
        make_batching("size_delay", AdaptiveConfig())
