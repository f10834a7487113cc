"""Per-run structures of the core that must not grow for the life of the process (issue 22):
the request ids remembered for the duplicate check are a window of core time, not every id
ever seen; and a step's idempotency key lives in its tenant's namespace."""

from __future__ import annotations

import pytest

from control.core.actions import Dispatch
from control.core.context import CoreConfig
from control.core.errors import DuplicateRequestError
from control.core.runs import step_key_base
from control.core.types import Request
from control.core.window import RecentKeys
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, devices, make_core, single

DEVS = devices(4, 2)


def _req(i: int | str, tenant: str = "t1", key: str | None = None) -> Request:
    return Request(f"q{i}", tenant, "only-minilm", prompt_tokens=64, idempotency_key=key)


def _core(**config):  # noqa: ANN003, ANN202
    return make_core(FcfsTenancy(), devs=DEVS, replicas=[("minilm:1", "d000")],
                     workflows=[single(EMBED)], config=CoreConfig(**config))  # fmt: skip


def test_recent_keys_forget_past_the_horizon_and_catch_duplicates_inside_it():
    window = RecentKeys(10.0)
    for i in range(1000):
        window.add(f"k{i}", float(i))  # one key a second
        assert f"k{i}" in window and f"k{max(0, i - 10)}" in window  # inside: found
    assert len(window) == 11  # bounded by the rate times the horizon
    assert "k988" not in window and "k989" in window


def test_recent_keys_keep_what_their_owner_still_holds():
    held = {"run-1"}
    window = RecentKeys(5.0, keep=held.__contains__)
    window.add("step-a", 0.0, owner="run-1")
    window.add("step-b", 0.0, owner="run-2")
    window.add("later", 100.0)
    assert "step-a" in window and "step-b" not in window
    held.clear()
    window.add("much-later", 200.0)  # released: remembered a horizon more, from now
    assert "step-a" in window
    window.add("even-later", 206.0)
    assert "step-a" not in window and len(window) == 1


def test_recent_keys_refuse_a_horizon_that_is_not_positive():
    with pytest.raises(ValueError, match="horizon must be > 0"):
        RecentKeys(0.0)
    with pytest.raises(ValueError, match="request_ids_kept_s must be > 0"):
        CoreConfig(request_ids_kept_s=-1.0)


def test_the_cores_request_ids_are_a_bounded_window_of_core_time():
    core = _core(request_ids_kept_s=60.0)
    for i in range(600):  # one request a second for ten minutes
        now = float(i)
        core.submit(_req(i), now)
        core.step(now)
    seen = core._st.inbox.seen_requests
    assert len(seen) <= 64  # not 600: the horizon and one span (60 / 16 s), in core time
    with pytest.raises(DuplicateRequestError, match="'q590'"):
        core.submit(_req(590), 600.0)  # inside the window: still caught


def test_an_active_runs_id_is_a_duplicate_however_old():
    core = _core(request_ids_kept_s=1.0)
    core.submit(_req("long"), 0.0)
    core.step(0.0)
    core.submit(_req("other"), 50.0)  # prunes the window past the long run's id
    assert "qlong" not in core._st.inbox.seen_requests
    assert "qlong" in core._st.runs.active  # it still runs (nothing completed it)
    with pytest.raises(DuplicateRequestError, match="'qlong'"):
        core.submit(_req("long"), 50.0)


def test_step_keys_of_two_tenants_with_one_idempotency_key_never_meet():
    a, b = _req(1, "acme", "k1"), _req(2, "globex", "k1")
    assert step_key_base(a) != step_key_base(b)
    assert step_key_base(_req(3, "acme", "k1")) == step_key_base(a)  # a repeat: the same keys
    assert step_key_base(_req(4)) == "q4"  # no key: the request id
    # a tenant id holding the separator cannot forge another tenant's namespace
    assert step_key_base(_req(5, "a/b", "c")) != step_key_base(_req(6, "a", "b/c"))


def test_two_tenants_runs_under_one_key_are_dispatched_under_their_own_keys():
    core = _core()
    core.submit(_req(1, "acme", "shared"), 0.0)
    core.submit(_req(2, "globex", "shared"), 0.0)
    plans = [core.step(0.0), core.step(1.0)]  # the batch goes once its delay has passed
    keys = {
        item.request_id: item.idempotency_key
        for plan in plans
        for d in plan.of_type(Dispatch)
        for item in d.items
    }
    assert set(keys) == {"q1", "q2"} and keys["q1"] != keys["q2"]
    assert keys["q1"].startswith("4:acme/shared") and keys["q2"].startswith("6:globex/shared")
