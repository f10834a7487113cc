"""Iteration-level (continuous) batching in the core: a running generate replica takes joiners.

A model with ``continuous_batching`` may get a new batch while others run on its replica, as
long as their sequences stay within ``max_batch_size``; without the flag a replica runs one batch
at a time. Each batch still completes as one ``BatchResult``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from control.core.actions import Dispatch, RunFinished
from control.core.batching.size_delay import SizeDelayConfig
from control.core.context import CoreConfig
from control.core.events import DeviceDown, ReplicaLoaded
from control.core.types import BatchResult, ModelSpec, Request, StepResult
from tests.core.fakes import FcfsTenancy
from tests.support.builders import LLM, devices, latency, make_core, single

CB = replace(LLM, continuous_batching=True)  # max_batch_size 4
DEVS = devices(1)
NO_DELAY = CoreConfig(batching_config=SizeDelayConfig(max_queue_delay_s=0.0))


def core_for(model: ModelSpec):  # noqa: ANN201
    return make_core(
        FcfsTenancy(), models=[model], devs=DEVS, replicas=[(model.key, "d000")],
        workflows=[single(model)], config=NO_DELAY,
    )  # fmt: skip


def request(i: int, model: ModelSpec, out: int = 16) -> Request:
    return Request(f"q{i}", "t1", f"only-{model.name}", prompt_tokens=64, max_output_tokens=out)


def done(d: Dispatch) -> BatchResult:
    items = tuple(StepResult(i.key, True, i.input_tokens, i.max_output_tokens) for i in d.items)
    return BatchResult(d.batch_id, d.predicted_us, items)


def submit(core, now: float, *reqs: Request) -> list[Dispatch]:  # noqa: ANN001
    for r in reqs:
        core.submit(r, now)
    return core.step(now).of_type(Dispatch)


def drain_first(core, model: ModelSpec) -> Dispatch:  # noqa: ANN001
    """Two requests at t=0: the first batch (both) dispatches at once on the idle replica."""
    (first,) = submit(core, 0.0, request(0, model), request(1, model))
    return first


def test_spec_refuses_continuous_batching_for_a_non_generate_model() -> None:
    with pytest.raises(ValueError, match="continuous_batching.*only generate"):
        ModelSpec("e", "1", "embed", 10, continuous_batching=True)


def test_a_running_continuous_replica_takes_a_joiner_at_once() -> None:
    core = core_for(CB)
    first = drain_first(core, CB)
    assert len(first.items) == 2
    (join,) = submit(core, 0.001, request(2, CB))
    assert join.replica_id == first.replica_id and len(join.items) == 1
    assert "joins the running decode loop" in join.reason
    rep = next(r for r in core.snapshot().replicas if r.replica_id == first.replica_id)
    assert rep.running_batches == (first.batch_id, join.batch_id) and rep.running_seqs == 3


def test_without_the_flag_the_second_batch_waits_for_the_first() -> None:
    core = core_for(LLM)
    first = drain_first(core, LLM)
    assert submit(core, 0.001, request(2, LLM)) == ()
    core.complete(done(first), 0.5)
    (second,) = core.step(0.5).of_type(Dispatch)
    assert [i.request_id for i in second.items] == ["q2"]


def test_joiners_are_capped_by_free_slots_and_completion_frees_them() -> None:
    core = core_for(CB)
    first = drain_first(core, CB)  # 2 of 4 slots
    (join,) = submit(core, 0.001, *(request(i, CB) for i in range(2, 6)))
    assert [i.request_id for i in join.items] == ["q2", "q3"]  # only 2 slots were free
    assert core.step(0.002).of_type(Dispatch) == ()  # full: q4, q5 wait
    snap = core.snapshot()
    why = {q.request_id: q.why for qs in snap.queues.values() for q in qs}
    assert "until it can start more" in why["q4"] or "1 of 1 busy" in why["q4"]
    core.complete(done(first), 0.5)  # frees 2 slots: the waiting two join
    (again,) = core.step(0.5).of_type(Dispatch)
    assert [i.request_id for i in again.items] == ["q4", "q5"]
    assert "joins" in again.reason  # the joined batch still runs


def test_each_batch_completes_on_its_own() -> None:
    core = core_for(CB)
    first = drain_first(core, CB)
    (join,) = submit(core, 0.001, request(2, CB, out=4))
    core.complete(done(join), 0.1)
    plan = core.step(0.1)
    finished = {a.request_id for a in plan.of_type(RunFinished)}
    assert finished == {"q2"}  # the joiner ends first; the first batch runs on
    rep = core.snapshot().replicas[0]
    assert rep.running_batches == (first.batch_id,) and rep.running_seqs == 2


def test_a_join_is_predicted_to_stall_the_running_batch_by_its_prefill() -> None:
    lat = latency([CB])
    core = core_for(CB)
    first = drain_first(core, CB)
    rec = core._st.cluster.replicas[first.replica_id]
    end_before = rec.running[first.batch_id]
    (join,) = submit(core, 0.001, request(2, CB))
    prefill_s = lat.forward_us(CB.key, "gpu-a", 1, 64) / 1e6
    assert rec.running[first.batch_id] == pytest.approx(end_before + prefill_s)
    decode = lat.decode_us(CB.key, "gpu-a", 3, 16)  # decodes with all three sequences
    first_prefill_end = lat.forward_us(CB.key, "gpu-a", 2, 64) / 1e6  # it started at t=0
    backlog = int((first_prefill_end - 0.001) * 1e6)  # the joiner prefills after it
    assert join.predicted_us == backlog + lat.forward_us(CB.key, "gpu-a", 1, 64) + decode
    assert rec.prefill_until == pytest.approx(first_prefill_end + prefill_s)
    assert rec.busy_until <= 0.001  # a slot is still free: new work could start now


def test_a_chunked_join_is_predicted_as_chunks_beside_the_running_decode_tokens() -> None:
    chunked = replace(CB, prefill_chunk_tokens=32)
    lat = latency([chunked])
    core = core_for(chunked)
    drain_first(core, chunked)  # 2 running sequences
    (join,) = submit(core, 0.001, request(2, chunked))
    # 64 prompt tokens, 30 per iteration beside the 2 running decode tokens: 30 + 30 + 4
    fwd = [lat.forward_us(chunked.key, "gpu-a", 1, t) for t in (32, 32, 6)]
    decode = lat.decode_us(chunked.key, "gpu-a", 3, 16)
    # the first batch (2 x 64 tokens, nothing running) took 4 chunks of 32 from t=0
    first_prefill_end = 4 * lat.forward_us(chunked.key, "gpu-a", 1, 32) / 1e6
    backlog = int((first_prefill_end - 0.001) * 1e6)
    assert join.predicted_us == backlog + sum(fwd) + decode
    assert sum(fwd) != lat.forward_us(chunked.key, "gpu-a", 1, 64)  # chunks cost their own


def test_spec_refuses_chunked_prefill_without_continuous_batching() -> None:
    with pytest.raises(ValueError, match="prefill_chunk_tokens.*needs continuous_batching"):
        ModelSpec("g", "1", "generate", 10, prefill_chunk_tokens=512)
    with pytest.raises(ValueError, match="prefill_chunk_tokens.*>= 0"):
        replace(CB, prefill_chunk_tokens=-1)


def test_routing_prefers_the_less_crowded_loop() -> None:
    """Two continuous replicas with free slots both "can start now": the one whose loop is
    emptier (no prefill backlog, fewer sequences to decode beside) wins, not the first id."""
    core = make_core(
        FcfsTenancy(), models=[CB], devs=devices(2),
        replicas=[(CB.key, "d000"), (CB.key, "d001")], workflows=[single(CB)], config=NO_DELAY,
    )  # fmt: skip
    busy = submit(core, 0.0, request(0, CB), request(1, CB), request(2, CB))
    loads = {d.replica_id: len(d.items) for d in busy}
    assert sum(loads.values()) == 3 and len(loads) == 2  # spread over both loops at once
    crowded = max(loads, key=loads.get)
    (nxt,) = submit(core, 0.0001, request(3, CB))
    assert nxt.replica_id != crowded


def test_losing_the_device_retries_every_running_batch() -> None:
    core = make_core(
        FcfsTenancy(), models=[CB], devs=devices(2), replicas=[(CB.key, "d000")],
        workflows=[single(CB)], config=NO_DELAY,
    )  # fmt: skip
    first = drain_first(core, CB)
    (join,) = submit(core, 0.001, request(2, CB))
    assert join.replica_id == first.replica_id
    core.ingest(ReplicaLoaded("spare", CB.key, ("d001",), "hot"), 0.001)
    core.ingest(DeviceDown("d000", "worker crashed"), 0.002)
    again = core.step(0.002).of_type(Dispatch)
    assert {i.request_id for d in again for i in d.items} == {"q0", "q1", "q2"}
    assert {d.replica_id for d in again} == {"spare"}
    core.complete(done(first), 0.003)  # the lost batch's late result changes nothing
    assert core.step(0.003).of_type(RunFinished) == ()
