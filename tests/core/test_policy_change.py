"""Policies change on a running core (``PoliciesChanged``, issue 24 item 9): the batching delay,
the batching and routing strategies and the fair-share policy take effect at the next step,
queued work is kept, and a bad change raises naming it and leaves the core as it was. Also the
queue-building batching policy's table (serving's default)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from control.core.actions import Dispatch
from control.core.batching.queue_building import QueueBuildingBatching, QueueBuildingConfig
from control.core.batching.size_delay import SizeDelayConfig
from control.core.context import CoreConfig
from control.core.events import PoliciesChanged
from control.core.tenancy.manager import TenancyManager
from control.core.types import ModelSpec, Request
from tests.support.builders import EMBED, devices, make_core, single

SLOW = CoreConfig(batching_config=SizeDelayConfig(max_queue_delay_s=0.050))


def _core(config: CoreConfig = SLOW):  # noqa: ANN202
    return make_core(TenancyManager(), devs=devices(1), replicas=[("minilm:1", "d000")],
                     workflows=[single(EMBED)], config=config)  # fmt: skip


def _submit(core, n: int, at: float = 0.0, tenant: str = "t1") -> None:  # noqa: ANN001
    for i in range(n):
        core.submit(Request(f"{tenant}-q{i}", tenant, "only-minilm", prompt_tokens=16), at)


def test_a_shorter_delay_dispatches_what_already_waits() -> None:
    core = _core()
    _submit(core, 2)
    assert not core.step(0.0).of_type(Dispatch)  # 2 of 8: waits for the 50 ms delay
    core.ingest(PoliciesChanged(replace(SLOW, batching_config=SizeDelayConfig(0.0))), 0.001)
    (sent,) = core.step(0.001).of_type(Dispatch)
    assert len(sent.items) == 2
    assert core.snapshot().counters.get("policies.changed") == 1


@pytest.mark.parametrize(
    ("change", "error", "named"),
    [
        (replace(SLOW, batching="nope"), ValueError, "nope"),
        (replace(SLOW, routing="nearest"), ValueError, "nearest"),
        (replace(SLOW, batching_config=QueueBuildingConfig()), TypeError, "SizeDelayConfig"),
        (replace(SLOW, finished_runs_kept=9), ValueError, "finished_runs_kept"),
    ],
)
def test_a_bad_change_raises_naming_it_and_changes_nothing(change, error, named) -> None:
    core = _core()
    _submit(core, 2)
    with pytest.raises(error, match=named):
        core.ingest(PoliciesChanged(change, fair_share="fcfs"), 0.0)
    assert not core.step(0.001).of_type(Dispatch)  # still the 50 ms delay
    assert core._st.pol.tenancy.fair.name == "vtc"


def test_an_unknown_fair_share_policy_changes_nothing() -> None:
    core = _core()
    before = core._st.pol.batching
    with pytest.raises(ValueError, match="lottery"):
        core.ingest(PoliciesChanged(replace(SLOW, batching_config=SizeDelayConfig(0.0)),
                                    fair_share="lottery"), 0.0)  # fmt: skip
    assert core._st.pol.batching is before and core._st.pol.tenancy.fair.name == "vtc"


def test_the_fair_share_policy_is_replaced_with_work_queued() -> None:
    core = _core()
    _submit(core, 3, tenant="a")
    _submit(core, 3, tenant="b")
    core.step(0.0)
    core.ingest(PoliciesChanged(SLOW, fair_share="fcfs"), 0.001)
    assert core._st.pol.tenancy.fair.name == "fcfs"
    core.ingest(PoliciesChanged(replace(SLOW, batching_config=SizeDelayConfig(0.0))), 0.002)
    (sent,) = core.step(0.002).of_type(Dispatch)
    assert len(sent.items) == 6  # nothing queued was lost in the swap


@dataclass
class Item:
    key: str
    arrival: float
    input_tokens: int = 16


MODEL = ModelSpec("m", "1", "embed", 10, max_batch_size=4, max_batch_tokens=1000)
BUILDING = QueueBuildingBatching(QueueBuildingConfig(max_queue_delay_s=0.010))


@pytest.mark.parametrize(
    ("arrivals", "now", "count", "why"),
    [
        ((0.0,), 0.0, 1, "lone item"),  # nothing says company is coming: at once
        ((0.0, 0.001), 0.001, None, None),  # 1 ms apart: the next is due well within 10 ms
        ((0.0, 0.001, 0.002, 0.003), 0.003, 4, "full"),
        ((0.0, 0.006), 0.006, 2, "expected after"),  # next due at 12 ms > 10 ms bound
        ((0.0, 0.001), 0.010, 2, "max delay"),  # the bound
        ((-0.030, 0.001), 0.001, 2, "max delay"),  # waited behind a running batch: at once
    ],
)
def test_queue_building_waits_only_while_arrivals_come(arrivals, now, count, why) -> None:
    queue = [Item(f"k{i}", t) for i, t in enumerate(arrivals)]
    formed = BUILDING.form(queue, min(arrivals), MODEL, now)
    if count is None:
        assert formed is None
        assert BUILDING.deadline(min(arrivals), MODEL) == pytest.approx(min(arrivals) + 0.010)
    else:
        assert formed is not None and formed.count == count and why in formed.reason


def test_a_batch_is_sent_ahead_even_while_queue_building_would_wait() -> None:
    """Waiting for company is for a free replica: behind a running batch the queued items wait
    anyway, and holding them back would idle the device for the completion's round trip."""
    from control.core.binding_config import BindingConfig
    from tests.core.fakes import FcfsTenancy

    config = CoreConfig(batching="queue_building",
                        batching_config=QueueBuildingConfig(max_queue_delay_s=0.050),
                        binding=BindingConfig(dispatch_ahead_us=1_000, ahead_min_fill=0.5))  # fmt: skip
    core = make_core(FcfsTenancy(), models=[EMBED], devs=devices(1),
                     replicas=[("minilm:1", "d000")], workflows=[single(EMBED)], config=config)  # fmt: skip
    _submit(core, 1)
    (first,) = core.step(0.0).of_type(Dispatch)  # a lone request: at once
    for i in range(1, 6):  # a burst arrives while it runs: the queue is building
        core.submit(Request(f"b{i}", "t1", "only-minilm", prompt_tokens=16), 0.0001)
    assert core.step(0.0001).of_type(Dispatch) == ()
    wake = core.next_wakeup(0.0001)
    assert wake is not None and wake < first.predicted_us / 1e6
    (ahead,) = core.step(wake).of_type(Dispatch)
    assert len(ahead.items) == 5 and "sent ahead" in ahead.reason
