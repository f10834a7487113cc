"""Pure parts of the executor: circuit breaker, LRU eviction planning, prefix cache bounds."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from control.executor.adapters.prefix_cache import PrefixKvCache
from control.executor.host.breaker import BreakerConfig, CircuitBreaker
from control.executor.host.handle import batch_deadline_s
from control.executor.host.lru import ReplicaTable
from control.executor.protocol import Batch, BatchItem, ExecutorError, ItemResult, StepKey
from control.executor.worker.inbox import Inbox

# (outcomes recorded at t=0, 1, 2..., then (ask at time, expected allowed, expected state))
BREAKER_CASES = [
    ([False, False], (2.0, True, "closed")),
    ([False, False, False], (3.0, False, "open")),
    ([False, False, False], (20.0, True, "half_open")),
    ([False, True, False, False], (4.0, True, "closed")),
]


@pytest.mark.parametrize(("outcomes", "ask"), BREAKER_CASES)
def test_breaker_opens_after_consecutive_failures_and_probes(outcomes, ask):
    breaker = CircuitBreaker(BreakerConfig(failure_threshold=3, cooldown_s=10.0))
    for t, ok in enumerate(outcomes):
        breaker.record(ok, float(t))
    at, allowed, state = ask
    assert breaker.allow(at)[0] is allowed
    assert breaker.state == state


def test_half_open_lets_one_probe_and_its_outcome_decides():
    breaker = CircuitBreaker(BreakerConfig(failure_threshold=1, cooldown_s=1.0))
    assert breaker.record(False, 0.0) == "open"
    assert breaker.allow(1.5) == (True, "circuit half-open: this batch is the probe")
    assert breaker.allow(1.6)[0] is False
    assert breaker.record(False, 1.7) is None or breaker.state == "open"
    assert breaker.allow(2.0)[0] is False
    assert breaker.allow(2.8)[0] is True
    assert breaker.record(True, 2.9) == "closed"


def test_breaker_config_rejects_bad_values():
    with pytest.raises(ValueError, match="failure_threshold"):
        BreakerConfig(failure_threshold=0)


replicas = st.lists(
    st.tuples(st.integers(1, 40), st.floats(0, 100), st.integers(0, 2)), min_size=0, max_size=8
)


@given(replicas, st.integers(1, 120), st.integers(40, 200))
def test_lru_plan_evicts_only_idle_oldest_first_and_makes_room(entries, need, budget):
    table = ReplicaTable()
    for i, (mib, used_at, in_flight) in enumerate(entries):
        table.add(f"r{i}", "d", mib, used_at)
        table.touch(f"r{i}", used_at, in_flight)
    table.add("other", "e", 1000, 0.0)  # another device never counts
    plan = table.plan("d", need, budget)
    chosen = [table.entries[r] for r in plan.evict]
    assert all(e.in_flight == 0 and e.device_id == "d" for e in chosen)
    if plan.fits:
        freed = sum(e.memory_mib for e in chosen)
        assert table.used_mib("d") - freed + need <= budget
        idle = sorted(
            (e for e in table.entries.values() if e.device_id == "d" and e.in_flight == 0),
            key=lambda e: (e.last_used, e.replica_id),
        )
        assert chosen == idle[: len(chosen)]
    else:
        assert plan.evict == () and "does not fit" in plan.reason


def kv(n_tokens: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.ones(1, 2, n_tokens, 4), torch.ones(1, 2, n_tokens, 4))]


@given(
    st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=12), max_size=20),
    st.integers(0, 2000),
)
def test_prefix_cache_bound_and_longest_match(prompts, max_bytes):
    cache = PrefixKvCache(max_bytes)
    for p in prompts:
        cache.store(p, kv(len(p)))
        assert cache.used_bytes <= max_bytes
    if prompts:
        probe = prompts[-1] + [9]
        n, hit = cache.lookup(probe)
        assert n <= len(probe) - 1
        if hit is not None:
            assert hit[0][0].shape[2] == n
            assert any(tuple(probe[:n]) == tuple(k[:n]) for k in cache._entries)


# (expected ms, multiple, floor s) -> deadline s
DEADLINE_CASES = [
    ((None, 5.0, 30.0), 30.0),  # nothing known: the floor
    ((100.0, 5.0, 30.0), 30.0),  # a fast batch still gets the floor
    ((20_000.0, 5.0, 30.0), 100.0),  # a long batch gets a multiple of its expected time
    ((0.0, 5.0, 2.0), 2.0),
]


@pytest.mark.parametrize(("args", "deadline"), DEADLINE_CASES)
def test_batch_deadline_is_a_multiple_of_expected_with_a_floor(args, deadline):
    assert batch_deadline_s(*args) == pytest.approx(deadline)


def _batch(batch_id: str, keys: list[str]) -> tuple:
    items = tuple(BatchItem(StepKey("r", k), k, {}) for k in keys)
    return ("batch", Batch(batch_id, "rep", items), {})


@given(
    st.lists(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=4, unique=True),
             max_size=5),
    st.sets(st.sampled_from("abcdefghz")),
)  # fmt: skip
def test_inbox_cancel_takes_exactly_the_named_queued_items(batches, cancel):
    inbox = Inbox()
    inbox.put(("load", "x"))
    for i, keys in enumerate(batches):
        inbox.put(_batch(f"b{i}", [f"{k}{i}" for k in keys]))
    wanted = {f"{k}{i}" for i in range(len(batches)) for k in cancel}
    taken = inbox.cancel(wanted)
    taken_keys = [it.idempotency_key for c in taken for it in c.items]
    queued = []
    while (msg := inbox.pop()) is not None:
        queued.append(msg)
    assert queued[0] == ("load", "x")  # other messages keep their place
    left = [it.idempotency_key for m in queued[1:] for it in m[1].items]
    everything = [f"{k}{i}" for i, keys in enumerate(batches) for k in keys]
    assert sorted(taken_keys) == sorted(k for k in everything if k in wanted)
    assert left == [k for k in everything if k not in wanted]  # order kept, nothing lost
    assert all(m[1].items for m in queued[1:])  # an emptied batch is dropped
    assert all(c.remaining == len(c.batch.items) - len(c.items) for c in taken)


@pytest.mark.parametrize(
    ("ok", "cause", "field"),
    [(True, "hang", "must be None when ok"), (False, "exploded", "is not one of")],
)
def test_item_result_cause_is_checked(ok, cause, field):
    with pytest.raises(ExecutorError, match=field):
        ItemResult(StepKey("r", "n"), "k", "rep", "cpu:0", ok=ok, cause=cause)
