"""The twin's queue-depth samples count every waiting step of a model: bound to a replica's
queue or still pending (unbound, late binding)."""

from __future__ import annotations

import pytest

from control.core.tenancy.cost import CostModel
from control.core.types import Request
from sim.metrics import Recorder
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, devices, make_core, single


@pytest.mark.parametrize("submitted", [1, 9, 20, 33])
def test_sample_counts_bound_and_pending_steps(submitted: int) -> None:
    core = make_core(FcfsTenancy(), devs=devices(1), replicas=[(EMBED.key, "d000")],
                     workflows=[single(EMBED)])  # fmt: skip
    for i in range(submitted):
        core.submit(Request(f"q{i}", f"t{i % 3}", "only-minilm", prompt_tokens=64), 0.0)
    core.step(0.0)
    core.step(0.005)  # the first batch is in flight; the rest waits
    snap = core.snapshot()
    in_flight = sum(len(b.keys) for b in snap.batches)
    bound = sum(r.queue_len for r in snap.replicas)
    pending = len(snap.pending.get(EMBED.key, ()))
    rec = Recorder(CostModel(), {})
    rec.sample(core, 0.005)
    ((at, depth),) = rec.queue_depth
    assert at == 0.005
    assert depth.get(EMBED.key, 0) == bound + pending
    # every step is in flight or waiting somewhere the sample sees
    assert depth.get(EMBED.key, 0) + in_flight == submitted
    if submitted > 16:  # more than a batch in flight plus a full queue: some stay unbound
        assert pending > 0
