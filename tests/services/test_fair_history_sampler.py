"""The fair-share sampler keeps sampling after one sample fails: a snapshot that breaks the
row builder once must not end the history for the rest of the gateway's life."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from control.services.fair_history import FairShareHistory, FairShareSampler


def _snapshot(counter: int) -> SimpleNamespace:
    tenant = SimpleNamespace(tenant_id="acme", weight=1, counter_milli=counter, in_flight_runs=0,
                             waiting_runs=0, borrowed_runs=0)  # fmt: skip
    return SimpleNamespace(now=float(counter), queues={}, unplaced=(), pending={},
                           tenancy=SimpleNamespace(tenants=[tenant]))  # fmt: skip


def test_a_failing_sample_is_skipped_and_the_next_ones_are_taken() -> None:
    calls = {"n": 0}

    def snapshot() -> SimpleNamespace:
        calls["n"] += 1
        if calls["n"] == 2:
            return SimpleNamespace(now=0.0, queues=None)  # breaks the row builder
        return _snapshot(calls["n"] * 1000)

    history = FairShareHistory(16)
    sampler = FairShareSampler(snapshot, lambda: None, history, every_s=0.01)

    async def run() -> None:
        sampler.ensure_started()
        await asyncio.sleep(0.2)
        await sampler.stop()

    asyncio.run(run())
    assert calls["n"] >= 4
    assert len(history) >= 3  # samples went on after the broken one
