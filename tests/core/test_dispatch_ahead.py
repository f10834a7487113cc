"""Dispatch ahead: a static replica is sent its next batch shortly before the running one ends.

With ``BindingConfig.dispatch_ahead_us`` > 0 the core wakes itself when a replica's lone batch
is within that many microseconds of its predicted end, binds pending work to it and sends the
next batch, which the executor starts the moment the device frees. Only a full batch goes
ahead (a partial one waits for the completion to grow); at most one batch waits.
"""

from __future__ import annotations

from control.core.actions import Dispatch
from control.core.batching.size_delay import SizeDelayConfig
from control.core.binding_config import BindingConfig
from control.core.context import CoreConfig
from control.core.types import BatchResult, Request, StepResult
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, LLM, devices, make_core, single

AHEAD_US = 1_000  # the test table's embed batches take a few ms
T1 = 0.0001  # when the next requests arrive, before the first batch nears its end


def core_with(ahead_us: int, model=EMBED):  # noqa: ANN001, ANN201
    config = CoreConfig(
        batching_config=SizeDelayConfig(max_queue_delay_s=0.0),
        binding=BindingConfig(dispatch_ahead_us=ahead_us),
    )
    return make_core(
        FcfsTenancy(), models=[model], devs=devices(1), replicas=[(model.key, "d000")],
        workflows=[single(model)], config=config,
    )  # fmt: skip


def request(i: int, model=EMBED) -> Request:  # noqa: ANN001
    out = 16 if model.task == "generate" else 0
    return Request(f"q{i}", "t1", f"only-{model.name}", prompt_tokens=64, max_output_tokens=out)


def done(d: Dispatch) -> BatchResult:
    items = tuple(StepResult(i.key, True, i.input_tokens, i.max_output_tokens) for i in d.items)
    return BatchResult(d.batch_id, d.predicted_us, items)


FULL = EMBED.max_batch_size


def start(core, waiting: int = FULL):  # noqa: ANN001, ANN201
    """q0 runs on the idle replica at t=0; ``waiting`` more arrive at T1 while it runs."""
    core.submit(request(0), 0.0)
    (first,) = core.step(0.0).of_type(Dispatch)
    for i in range(1, waiting + 1):
        core.submit(request(i), T1)
    assert core.step(T1).of_type(Dispatch) == ()  # far from its end: they wait
    return first


def test_the_next_batch_is_sent_when_the_running_one_is_about_to_end() -> None:
    core = core_with(AHEAD_US)
    first = start(core)
    end = first.predicted_us / 1e6
    wake = core.next_wakeup(T1)
    assert wake is not None and abs(wake - (end - AHEAD_US / 1e6)) < 1e-9
    (ahead,) = core.step(wake).of_type(Dispatch)
    assert [i.request_id for i in ahead.items] == [f"q{i}" for i in range(1, FULL + 1)]
    assert "sent ahead" in ahead.reason and ahead.replica_id == first.replica_id
    rec = core._st.cluster.replicas[first.replica_id]
    # it runs after the first: the replica is busy until both are done
    assert abs(rec.busy_until - (end + ahead.predicted_us / 1e6)) < 1e-9


def test_at_most_one_batch_waits_and_the_next_goes_near_the_second_end() -> None:
    core = core_with(AHEAD_US)
    first = start(core)
    (ahead,) = core.step(core.next_wakeup(T1)).of_type(Dispatch)
    later = [request(i) for i in range(FULL + 1, 2 * FULL + 1)]
    for r in later:
        core.submit(r, first.predicted_us / 1e6 - 0.001)
    assert core.step(first.predicted_us / 1e6 - 0.001).of_type(Dispatch) == ()  # two in flight
    t = first.predicted_us / 1e6
    core.complete(done(first), t)
    assert core.step(t).of_type(Dispatch) == ()  # q1's batch runs alone now, far from its end
    wake = core.next_wakeup(t)
    second_end = t + ahead.predicted_us / 1e6
    assert wake is not None and abs(wake - (second_end - AHEAD_US / 1e6)) < 1e-6
    (third,) = core.step(wake).of_type(Dispatch)
    assert len(third.items) == FULL  # a full batch of the later arrivals (fair-share order)
    assert {i.request_id for i in third.items} <= {r.request_id for r in later}


def test_a_partial_batch_waits_for_the_completion() -> None:
    core = core_with(AHEAD_US)
    first = start(core, waiting=FULL - 1)
    end = first.predicted_us / 1e6
    assert core.step(end - AHEAD_US / 2e6).of_type(Dispatch) == ()  # within reach, not full
    core.complete(done(first), end)
    (second,) = core.step(end).of_type(Dispatch)
    assert len(second.items) == FULL - 1 and "sent ahead" not in second.reason


def test_without_dispatch_ahead_the_next_batch_waits_for_the_completion() -> None:
    core = core_with(0)
    first = start(core)
    end = first.predicted_us / 1e6
    assert core.step(end - 0.001).of_type(Dispatch) == ()
    core.complete(done(first), end)
    (second,) = core.step(end).of_type(Dispatch)
    assert len(second.items) == FULL and "sent ahead" not in second.reason


def test_a_generate_replica_is_never_sent_ahead() -> None:
    """Its worker would take a waiting batch into the running decode loop: a static generate
    replica keeps one batch at a time."""
    core = core_with(20_000, LLM)
    core.submit(request(0, LLM), 0.0)
    (first,) = core.step(0.0).of_type(Dispatch)
    for i in range(1, LLM.max_batch_size + 1):
        core.submit(request(i, LLM), 0.001)
    end = first.predicted_us / 1e6
    assert core.step(0.001).of_type(Dispatch) == ()
    assert core.step(end - 0.005).of_type(Dispatch) == ()  # within 20 ms of its end: still not
    core.complete(done(first), end)
    (second,) = core.step(end).of_type(Dispatch)
    assert len(second.items) == LLM.max_batch_size
