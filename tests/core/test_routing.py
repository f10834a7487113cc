"""Routing: prefix index, predicted completion, affinity with a balance guard, steal pricing."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from control.core.routing.base import RoutingContext, StepDemand
from control.core.routing.predicted_completion import (
    PredictedCompletionConfig,
    PredictedCompletionRouting,
)
from control.core.routing.prefix_index import PrefixIndex
from control.core.routing.stealing import StealConfig, price_steal
from control.core.routing.transfer import TransferCosts
from control.core.types import DeviceSpec
from tests.support.builders import latency

D0 = DeviceSpec("d0", "n0", "gpu", "gpu-a", 1000, "g0")
D1 = DeviceSpec("d1", "n0", "gpu", "gpu-a", 1000, "g0")
D2 = DeviceSpec("d2", "n1", "gpu", "gpu-a", 1000, "g1")


@dataclass
class Cand:
    replica_id: str
    device: DeviceSpec
    queue_us: int = 0
    loading: bool = False
    ready_at: float = 0.0
    busy_until: float = 0.0
    prefix: PrefixIndex = field(default_factory=lambda: PrefixIndex(64))
    prefill_until: float = 0.0
    loop_seqs: int = 0


def ctx(sessions: dict | None = None) -> RoutingContext:
    return RoutingContext(0.0, latency(), TransferCosts(), sessions or {})


def demand(blocks: tuple[int, ...] = (), session: str | None = None, inputs=()) -> StepDemand:  # noqa: ANN001
    return StepDemand("smollm2:1", 2048, 0, blocks, session, inputs)


def test_prefix_index_matches_leading_blocks_and_evicts_lru() -> None:
    idx = PrefixIndex(3)
    idx.insert([1, 2, 3])
    assert idx.match([1, 2, 9]) == 2 and idx.match([9, 1]) == 0
    idx.insert([1])  # touch 1: LRU order 2, 3, 1
    idx.insert([4])  # evicts 2
    assert 2 not in idx and idx.match([1]) == 1 and len(idx) == 3


def test_lowest_predicted_completion_wins_with_parts() -> None:
    pol = PredictedCompletionRouting()
    cands = [
        Cand("a", D0, queue_us=9000),
        Cand("b", D1, queue_us=1000),
        Cand("c", D2, loading=True, ready_at=0.5),
    ]
    choice = pol.choose(demand(), cands, ctx())
    assert choice is not None and choice.score.replica_id == "b"
    assert "lowest predicted completion" in choice.reason


def test_transfer_and_prefix_saving_change_the_choice() -> None:
    pol = PredictedCompletionRouting()
    near, far = Cand("near", D0, queue_us=1000), Cand("far", D2, queue_us=0)
    assert pol.choose(demand(inputs=(D0,)), [near, far], ctx()).score.replica_id == "near"
    warm = Cand("warm", D2, queue_us=500)
    warm.prefix.insert([1, 2, 3, 4])
    cold = Cand("cold", D1)
    choice = pol.choose(demand(blocks=(1, 2, 3, 4)), [cold, warm], ctx())
    assert (
        choice.score.replica_id == "warm"
        and choice.score.hit_blocks == 4
        and choice.score.saving_us > 500
    )


@pytest.mark.parametrize(
    ("affine_queue", "stays"), [(0, True), (20_000, True), (20_001, False), (90_000, False)]
)
def test_affinity_holds_until_the_balance_guard(affine_queue: int, stays: bool) -> None:
    pol = PredictedCompletionRouting(PredictedCompletionConfig(balance_guard_us=20_000))
    home, other = Cand("home", D0, queue_us=affine_queue), Cand("other", D1, queue_us=0)
    choice = pol.choose(demand(session="s1"), [other, home], ctx({"s1": "home"}))
    assert (choice.score.replica_id == "home") is stays
    assert choice.affinity is stays
    assert ("balance guard" in choice.reason) is (not stays)


def test_tie_breaks_on_replica_id() -> None:
    pol = PredictedCompletionRouting()
    assert pol.choose(demand(), [Cand("z", D0), Cand("a", D1)], ctx()).score.replica_id == "a"


@given(
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**6),
    st.integers(0, 10**5),
    st.integers(0, 10**4),
    st.integers(0, 1000),
    st.booleans(),
)
def test_steal_exactly_when_priced_condition_holds(
    vw, tw, load, lost, transfer, gain, enabled
) -> None:  # noqa: ANN001
    d = price_steal(vw, tw, load, lost, transfer, StealConfig(enabled=enabled, min_gain_us=gain))
    assert d.steal == (enabled and (vw - tw) - (load + lost + transfer) > gain)
    assert d.saved_us == vw - tw and d.price_us == load + lost + transfer
    assert str(d.price_us) in d.reason


def test_prefix_index_keeps_held_prefixes_while_siblings_bring_new_tail_blocks() -> None:
    """Two system prompts of 4 blocks and their first chats fill 10 blocks: each later chat of one of them brings one
    new (question) block; the other prompt's blocks must stay, as in the worker's cache."""
    idx = PrefixIndex(10)
    a, b = (1, 2, 3, 4), (11, 12, 13, 14)
    idx.insert(a + (100,))
    idx.insert(b + (200,))
    for q in range(101, 110):
        idx.insert(a + (q,))
    assert idx.match(b + (999,)) == 4 and idx.match(a + (999,)) == 4
    assert len(idx) <= 10
