"""Pending (unbound) work reaches the operator: a real core's snapshot, turned into the API's
JSON (per-tenant queue depth and explanations) and into the console's waiting tables, counts
every waiting step with the core's reason."""

from __future__ import annotations

import pytest

from app import transforms
from control.api.routes.snapshot import _tenants, plain
from control.core.types import Request
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, devices, make_core, single


def _busy_core(submitted: int):  # noqa: ANN202
    """One replica: a batch in flight, a full replica queue, the rest pending."""
    core = make_core(FcfsTenancy(), devs=devices(1), replicas=[(EMBED.key, "d000")],
                     workflows=[single(EMBED)])  # fmt: skip
    for i in range(submitted):
        core.submit(Request(f"q{i}", f"t{i % 2}", "only-minilm", prompt_tokens=64), 0.0)
    core.step(0.0)
    core.step(0.005)
    return core.snapshot()


@pytest.mark.parametrize("submitted", [3, 20, 40])
def test_api_tenants_count_pending_steps_with_their_reason(submitted: int) -> None:
    snap = _busy_core(submitted)
    in_flight = sum(len(b.keys) for b in snap.batches)
    tenants = {t.tenant: t for t in _tenants(snap)}
    assert sum(t.queued_steps for t in tenants.values()) + in_flight == submitted
    if snap.pending:
        why = [w for t in tenants.values() for w in t.explanations]
        assert any(w.startswith("waiting for a free replica of minilm:1") for w in why)


def test_console_tables_agree_with_the_api_on_pending_work() -> None:
    snap = _busy_core(40)
    as_json = {"queues": plain(snap.queues), "pending": plain(snap.pending),
               "unplaced": plain(snap.unplaced)}  # fmt: skip
    counts = transforms.waiting_counts(as_json).set_index("tenant")
    api = {t.tenant: t.queued_steps for t in _tenants(snap)}
    assert counts["total"].to_dict() == api
    assert int(counts["pending"].sum()) == len(snap.pending[EMBED.key]) > 0
    reasons = transforms.waiting_reasons(as_json)
    pending = reasons[reasons["waits_in"] == "pending"]
    assert len(pending) == int(counts["pending"].sum())
    assert pending["why"].str.contains("fair-share order").all()
