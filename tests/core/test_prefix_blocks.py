"""Prefix block hashes (control.core.routing.prefix_blocks): whole blocks only, chained (block
k's hash covers blocks 0..k), stable across processes, and what routing's predicted saving
counts per hit block (the core's ``prefix_block_tokens``)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from control.core.routing.prefix_blocks import block_hashes


def test_one_hash_per_whole_block_and_none_for_a_partial_one():
    assert block_hashes(list(range(47)), 16) == block_hashes(list(range(32)), 16)
    assert len(block_hashes(list(range(47)), 16)) == 2
    assert block_hashes(list(range(15)), 16) == ()
    assert len(block_hashes(list(range(48)), 16)) == 3


@pytest.mark.parametrize("changed", [0, 15, 16, 40])
def test_a_changed_token_changes_its_block_and_every_later_one_only(changed):
    base = list(range(100, 164))  # four blocks of 16
    other = list(base)
    other[changed] = 7
    a, b = block_hashes(base, 16), block_hashes(other, 16)
    first = changed // 16
    assert a[:first] == b[:first]
    assert all(x != y for x, y in zip(a[first:], b[first:], strict=True))


def test_chained_a_block_equal_to_another_at_a_different_depth_hashes_differently():
    block = list(range(16))
    hashes = block_hashes(block * 3, 16)
    assert len(set(hashes)) == 3  # the same tokens at depth 0, 1, 2: three prefixes


def test_hashes_are_the_same_in_another_process():
    here = block_hashes(list(range(64)), 16)
    code = ("from control.core.routing.prefix_blocks import block_hashes;"
            "print(block_hashes(list(range(64)), 16))")  # fmt: skip
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True).stdout.strip()  # fmt: skip
    assert there == str(here)
    assert all(0 <= h < 2**63 for h in here)


def test_a_block_size_below_one_is_refused():
    with pytest.raises(ValueError, match="block_tokens must be >= 1"):
        block_hashes([1, 2, 3], 0)


def test_the_predicted_saving_counts_block_tokens_of_the_routing_context():
    """A hit of 4 blocks saves the prefill of 4 * block_tokens prompt tokens: 64 tokens with
    the live default of 16, the whole 2048-token prompt with the twin's 512."""
    from control.core.routing.base import RoutingContext, StepDemand
    from control.core.routing.predicted_completion import PredictedCompletionRouting
    from control.core.routing.transfer import TransferCosts
    from tests.core.test_routing import D0, Cand
    from tests.support.builders import latency

    warm = Cand("warm", D0)
    warm.prefix.insert([1, 2, 3, 4])
    demand = StepDemand("smollm2:1", 2048, 0, (1, 2, 3, 4), None, ())
    lat = latency()
    savings = {}
    for size in (16, 512):
        ctx = RoutingContext(0.0, lat, TransferCosts(), {}, size)
        savings[size] = PredictedCompletionRouting().choose(demand, [warm], ctx).score.saving_us
    full = lat.forward_us("smollm2:1", D0.accelerator, 1, 2048)
    assert savings[16] == full - lat.forward_us("smollm2:1", D0.accelerator, 1, 2048 - 64)
    assert savings[512] == full - lat.forward_us("smollm2:1", D0.accelerator, 1, 0)
    assert 0 < savings[16] < savings[512]


def test_a_replica_running_prefix_hits_is_predicted_busy_for_their_suffix_only():
    """The replica holding a prefix runs a chat that hits it; the next chat of that prefix
    arrives meanwhile. The running batch is predicted to end after its suffix's prefill (the
    cached prefix is not computed again), so the holder still wins the next chat over the idle
    replica, and the chat is bound to it at once rather than left for late binding, where the
    idle replica would take it. Before, the holder looked busy for a whole prefill, and late
    binding gave the chat to the replica free first: a cold prefill there."""
    from control.core.actions import Dispatch
    from control.core.batching.size_delay import SizeDelayConfig
    from control.core.context import CoreConfig
    from control.core.types import BatchResult, Request, StepResult
    from tests.core.fakes import FcfsTenancy
    from tests.support.builders import LLM, devices, make_core, single

    config = CoreConfig(batching_config=SizeDelayConfig(max_queue_delay_s=0.0))
    core = make_core(FcfsTenancy(), devs=devices(4, 2), workflows=[single(LLM)], config=config,
                     replicas=[("smollm2:1", "d000"), ("smollm2:1", "d001")])  # fmt: skip
    blocks = tuple(range(1, 5))  # 4 blocks of 512: the whole 2048-token prompt is shared

    def chat(i: int, now: float) -> list[Dispatch]:
        core.submit(Request(f"c{i}", "t1", "only-smollm2", prompt_tokens=2048,
                            prefix_blocks=blocks), now)  # fmt: skip
        return core.step(now).of_type(Dispatch)

    (first,) = chat(0, 0.0)  # cold, on r0 (a tie broken by replica id)
    core.complete(BatchResult(first.batch_id, 1000, (StepResult(first.items[0].key),)), 1.0)
    core.step(1.0)
    (hit,) = chat(1, 1.0)
    assert hit.replica_id == first.replica_id and hit.items[0].predicted_hit_blocks == 4
    assert not chat(2, 1.0001)  # the idle r1 does not take it: it waits for r0, the holder
    assert [v.key for v in core.snapshot().queues[first.replica_id]] == ["c2/n/1"]
