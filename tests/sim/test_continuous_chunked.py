"""Chunked prefill in the continuous-batching engine (``sim.continuous``, ``chunk_tokens``):
iteration costs and order from its rules, and the event-driven computation checked against a
token-by-token reference."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.continuous import ContinuousEngine, Joiner, Timing
from sim.lanes import Lanes

FIXED, PER_SEQ = 700, 90  # decode: FIXED + PER_SEQ x n per iteration
P_FIXED, P_TOKEN = 400, 10  # one forward over x tokens: P_FIXED + P_TOKEN x x


def decode(n: int, k: int) -> int:
    return k * (FIXED + PER_SEQ * n)


def prefill(tokens: int) -> int:
    return P_FIXED + P_TOKEN * tokens


def chunked(chunk: int) -> ContinuousEngine:
    return ContinuousEngine(decode, prefill, chunk)


def test_a_lone_prompt_is_prefilled_in_chunks_then_decoded() -> None:
    got = chunked(100).join(Joiner("a", 50, 9_999, (5, 5), prompt_tokens=250), 0)
    first = 50 + prefill(100) + prefill(100) + prefill(50)  # prefill_us is not used
    assert got == {"a": Timing(first, first + decode(2, 5), 2)}


def test_running_sequences_decode_one_token_in_every_chunk_iteration() -> None:
    eng = chunked(100)
    a_first = prefill(10)
    eng.join(Joiner("a", 0, 0, (20, 20), prompt_tokens=10), 0)
    # b arrives at a's 3rd decode boundary: its 300 prompt tokens share each iteration with a's
    # two decode tokens (98 + 98 + 98 + 6), and a gains a token in each of them
    now = a_first + 3 * decode(2, 1)
    got = eng.join(Joiner("b", now, 0, (4,), prompt_tokens=300), now)
    iters = [prefill(100)] * 3 + [prefill(2 + 6)]
    b_first = now + sum(iters)
    assert got["b"].first_token_us == b_first
    # a had 17 tokens left at b's arrival, decoded 4 during b's chunks, 4 more with b, 9 alone
    assert got["b"].end_us == b_first + decode(3, 4)
    assert got["a"].end_us == b_first + decode(3, 4) + decode(2, 9)
    # without chunks a would have stalled for b's whole prefill and gained nothing meanwhile
    whole = ContinuousEngine(decode)
    whole.join(Joiner("a", 0, a_first, (20, 20)), 0)
    stalled = whole.join(Joiner("b", now, prefill(300), (4,)), now)
    assert got["a"].end_us < stalled["a"].end_us


def test_the_chunk_budget_counts_the_running_decode_tokens() -> None:
    eng = chunked(8)
    eng.join(Joiner("a", 0, 0, (30,) * 6, prompt_tokens=1), 0)
    t = prefill(1)
    got = eng.join(Joiner("b", t, 0, (1,), prompt_tokens=5), t)
    # 6 running sequences leave room for 2 prompt tokens per iteration: 2 + 2 + 1
    assert got["b"].first_token_us == t + 2 * prefill(8) + prefill(7)


def test_prompt_tokens_always_progress_when_the_loop_fills_the_budget() -> None:
    eng = chunked(4)
    eng.join(Joiner("a", 0, 0, (30,) * 6, prompt_tokens=1), 0)
    t = prefill(1)
    got = eng.join(Joiner("b", t, 0, (1,), prompt_tokens=2), t)
    assert got["b"].first_token_us == t + 2 * prefill(6 + 1)  # one prompt token per iteration


def test_waiting_prompts_share_an_iteration_in_arrival_order() -> None:
    eng = chunked(100)
    a = eng.join(Joiner("a", 0, 0, (3,), prompt_tokens=60), 0)
    b = eng.join(Joiner("b", 0, 0, (3,), prompt_tokens=60), 0)
    assert a["a"].first_token_us == prefill(60)  # before b was known
    # a's 60 and b's first 40 in one iteration, then b's last 20 with a's decode token
    assert b["a"].first_token_us == prefill(100)
    assert b["b"].first_token_us == prefill(100) + prefill(1 + 20)


def test_scatter_prices_an_iteration_by_the_first_prompt_it_serves() -> None:
    got = chunked(100).join(Joiner("a", 0, 0, (1,), factor=1.5, prompt_tokens=150), 0)
    assert got["a"].first_token_us == round(prefill(100) * 1.5) + round(prefill(50) * 1.5)


def test_a_chunked_engine_needs_its_prefill_cost() -> None:
    with pytest.raises(ValueError, match="prefill cost"):
        ContinuousEngine(decode, None, 64)
    with pytest.raises(ValueError, match="chunk_tokens"):
        ContinuousEngine(decode, prefill, -1)


def test_lanes_start_a_chunked_engine_for_a_replica() -> None:
    lanes = Lanes()
    got = lanes.join("r", ("d0",), 1.0, decode, Joiner("a", 0, 0, (2,), prompt_tokens=130),
                     "A", prefill=prefill, chunk_tokens=64)  # fmt: skip
    first = prefill(64) + prefill(64) + prefill(2)
    assert got[0].end_s == 1.0 + (first + decode(1, 2)) / 1e6


# ----- the event-driven engine against a token-by-token reference


def reference(joins: list[Joiner], chunk: int) -> dict[str, Timing]:
    """One iteration at a time, every batch known in advance (factor 1)."""
    pending = sorted(joins, key=lambda j: j.arrive_us)  # stable: dispatch order among ties
    left = {j.batch_id: max(1, j.prompt_tokens) for j in joins}
    seqs: list[list] = []  # [batch id, tokens left]
    first: dict[str, int] = {}
    size: dict[str, int] = {}
    out: dict[str, Timing] = {}
    t = 0
    while pending or seqs:
        arrived = [j for j in pending if j.arrive_us <= t]
        if not arrived and not seqs:
            t = pending[0].arrive_us
            continue
        room = max(1, chunk - len(seqs)) if arrived else 0
        served = []
        for j in arrived:
            take = min(left[j.batch_id], room)
            if take <= 0:
                break
            left[j.batch_id] -= take
            room -= take
            served.append((j, take))
        tokens = len(seqs) + sum(take for _, take in served)
        t += prefill(tokens) if served else decode(len(seqs), 1)
        for s in seqs:
            s[1] -= 1
        for b in {s[0] for s in seqs if s[1] == 0}:
            seqs = [s for s in seqs if s[0] != b or s[1] > 0]
            if not any(s[0] == b for s in seqs):
                out[b] = Timing(first[b], t, size[b])
        for j, _ in served:
            if left[j.batch_id]:
                continue
            pending.remove(j)
            first[j.batch_id], size[j.batch_id] = t, len(seqs) + len(j.outputs)
            seqs += [[j.batch_id, o] for o in j.outputs if o > 0]
            if not any(s[0] == j.batch_id for s in seqs):
                out[j.batch_id] = Timing(t, t, size[j.batch_id])
    return out


batches = st.lists(
    st.tuples(
        st.integers(0, 40_000),  # gap since the previous dispatch
        st.integers(0, 6_000),  # transfer
        st.integers(0, 300),  # prompt tokens
        st.lists(st.integers(0, 25), min_size=1, max_size=4),
    ),
    min_size=1,
    max_size=7,
)


@settings(max_examples=150, deadline=None)
@given(batches, st.sampled_from([1, 7, 64, 256]))
def test_event_driven_timings_equal_the_token_by_token_reference(spec, chunk) -> None:
    joins, now = [], 0
    for i, (gap, move, tokens, outs) in enumerate(spec):
        now += gap
        joins.append((now, Joiner(f"b{i}", now + move, 0, tuple(outs), prompt_tokens=tokens)))
    eng = chunked(chunk)
    latest: dict[str, Timing] = {}
    for now, j in joins:
        got = eng.join(j, now)
        assert j.batch_id in got
        latest.update(got)
    # the reference takes ties in dispatch order, as the engine does
    assert latest == reference([j for _, j in joins], chunk)


# ----- through the simulated executor: the model's setting, prompt tokens, cache hits


def test_the_simulated_executor_chunks_by_the_models_setting_and_prompt_tokens() -> None:
    from control.core.actions import BatchItem, Dispatch
    from control.core.latency import DecodeRow, FallbackProfile, TableLatencyModel
    from control.core.types import DeviceSpec, ModelSpec
    from sim.executor import BLOCK_TOKENS, SimExecutor, SimExecutorConfig

    fb = FallbackProfile(fixed_us=2_000, per_token_us=20)
    lat = TableLatencyModel(decode=[DecodeRow("llm:1", "h100", FIXED, PER_SEQ)], fallback=fb)
    devices = {"g0": DeviceSpec("g0", "n0", "gpu", "h100", 80_000, "nv0")}

    def item(rid: str, tokens: int, blocks: tuple[int, ...] = ()) -> BatchItem:
        return BatchItem(f"{rid}/gen/0", rid, "gen", 0, None, rid, "generate", (), tokens, 3,
                         prefix_blocks=blocks)  # fmt: skip

    def first_token_us(chunk: int, *items: BatchItem) -> float:
        spec = ModelSpec("llm", "1", "generate", 40_000, continuous_batching=True,
                         prefill_chunk_tokens=chunk)  # fmt: skip
        ex = SimExecutor(lat, devices, {"llm:1": spec}, SimExecutorConfig())
        d = Dispatch("A", "r0", "llm:1", None, ("g0",), items, 0, 0, "hand-made")
        got, _ = ex.join(d, 1.0)
        return got.first_token_us

    # unchunked: one padded batch forward (2 x 1000 tokens); chunked: 1000 + 600 tokens packed
    assert first_token_us(0, item("a", 1000), item("b", 600)) == fb.fixed_us + 20 * 2 * 1000
    chunks = [512, 512, 512, 64]
    assert first_token_us(512, item("a", 1000), item("b", 600)) == sum(
        fb.fixed_us + 20 * c for c in chunks
    )
    # a prefix-cache hit shortens the prompt a chunked engine prefills
    warm = item("c", 2 * BLOCK_TOKENS + 10, blocks=(1, 2))  # two whole blocks, then 10
    spec = ModelSpec("llm", "1", "generate", 40_000, continuous_batching=True,
                     prefill_chunk_tokens=4096)  # fmt: skip
    ex = SimExecutor(lat, devices, {"llm:1": spec}, SimExecutorConfig())
    for n, bid in enumerate(("P", "Q")):
        d = Dispatch(bid, "r0", "llm:1", None, ("g0",), (warm,), 0, 0, "hand-made")
        got, _ = ex.join(d, 1.0 + n)
        ex.deliver(d)
    assert got.first_token_us == fb.fixed_us + 20 * 10  # only the uncached tail
