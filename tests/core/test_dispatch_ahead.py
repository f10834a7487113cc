"""Dispatch ahead: a static replica is sent its next batch shortly before the running one ends.

With ``BindingConfig.dispatch_ahead_us`` > 0 the core wakes itself when a replica's lone batch
is within that many microseconds of its predicted end, binds pending work to it and sends the
next batch, which the executor starts the moment the device frees. Only a batch of at least
``ahead_min_fill`` of the batch limit goes ahead (a smaller one waits for the completion to
grow); at most one batch waits.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from control.core.actions import Dispatch
from control.core.batching.size_delay import SizeDelayConfig
from control.core.binding_config import BindingConfig
from control.core.context import CoreConfig
from control.core.types import BatchResult, Request, StepResult
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, LLM, devices, make_core, single

AHEAD_US = 1_000  # the test table's embed batches take a few ms
T1 = 0.0001  # when the next requests arrive, before the first batch nears its end


def core_with(ahead_us: int, model=EMBED, fill: float = 1.0):  # noqa: ANN001, ANN201
    """``fill`` 1.0 (only full batches go ahead) unless a test says otherwise."""
    config = CoreConfig(
        batching_config=SizeDelayConfig(max_queue_delay_s=0.0),
        binding=BindingConfig(dispatch_ahead_us=ahead_us, ahead_min_fill=fill),
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


def test_a_batch_at_the_minimum_fill_is_sent_ahead_with_all_that_is_queued() -> None:
    """With ``ahead_min_fill`` 0.5 half a batch (or more) goes ahead: the device does not idle
    for the completion's round trip when the queue is a few items short of full."""
    half = FULL // 2
    for waiting in (half, FULL - 1):
        core = core_with(AHEAD_US, fill=0.5)
        first = start(core, waiting=waiting)
        (ahead,) = core.step(core.next_wakeup(T1)).of_type(Dispatch)
        assert [i.request_id for i in ahead.items] == [f"q{i}" for i in range(1, waiting + 1)]
        assert "sent ahead" in ahead.reason and ahead.replica_id == first.replica_id
        assert core.snapshot().counters["batching.sent_ahead"] == 1


def test_below_the_minimum_fill_the_queue_waits_until_it_reaches_it() -> None:
    core = core_with(AHEAD_US, fill=0.5)
    first = start(core, waiting=FULL // 2 - 1)
    wake = core.next_wakeup(T1)
    assert core.step(wake).of_type(Dispatch) == ()  # at the ahead instant: one short of half
    core.submit(request(FULL), wake)  # the queue reaches half a batch before the end
    (ahead,) = core.step(wake).of_type(Dispatch)
    assert len(ahead.items) == FULL // 2 and "sent ahead" in ahead.reason
    assert abs(core._st.cluster.replicas[first.replica_id].busy_until
               - (first.predicted_us + ahead.predicted_us) / 1e6) < 1e-9  # fmt: skip


def test_the_minimum_fill_follows_the_batch_limit_in_force() -> None:
    """The fill is a fraction of the model's batch limit: the same queue that is half a batch
    for one limit is too little for a limit twice as large."""
    big = replace(EMBED, max_batch_size=2 * FULL)
    core = core_with(AHEAD_US, model=big, fill=0.5)
    core.submit(request(0), 0.0)
    (first,) = core.step(0.0).of_type(Dispatch)
    for i in range(1, FULL // 2 + 1):
        core.submit(request(i), T1)
    core.step(T1)
    assert core.step(core.next_wakeup(T1)).of_type(Dispatch) == ()  # a quarter of 2 x FULL
    end = first.predicted_us / 1e6
    core.complete(done(first), end)
    (second,) = core.step(end).of_type(Dispatch)
    assert len(second.items) == FULL // 2 and "sent ahead" not in second.reason


@pytest.mark.parametrize("fill", [0.0, -0.5, 1.5])
def test_the_minimum_fill_must_be_a_fraction(fill: float) -> None:
    with pytest.raises(ValueError, match="ahead_min_fill"):
        BindingConfig(dispatch_ahead_us=AHEAD_US, ahead_min_fill=fill)


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


def test_past_its_predicted_end_a_running_batch_still_gets_one_sent_ahead() -> None:
    """An unprofiled model's table predicts too short a batch: the ahead instant has passed
    while the batch still runs. The fill rule alone decides then (half a batch goes, less waits),
    and at most one batch waits behind the one running."""
    core = core_with(AHEAD_US, fill=0.5)
    core.submit(request(0), 0.0)
    (first,) = core.step(0.0).of_type(Dispatch)
    late = first.predicted_us / 1e6 + 0.05  # well past the predicted end, no completion yet
    for i in range(1, FULL // 2):
        core.submit(request(i), late)
    assert core.step(late).of_type(Dispatch) == ()  # one short of half a batch
    core.submit(request(FULL // 2), late)
    (ahead,) = core.step(late).of_type(Dispatch)
    assert len(ahead.items) == FULL // 2 and "past its predicted end" in ahead.reason
    for i in range(FULL // 2 + 1, 2 * FULL):
        core.submit(request(i), late)
    assert core.step(late).of_type(Dispatch) == ()  # a full queue, but one batch already waits
