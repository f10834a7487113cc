"""A step that fails on an unusable input (fault ``bad_input``) is final (issue 22): the core
does not retry it, does not take its device for lost, and fails the run naming the input as the
caller knows it, so that the API can answer 422 for that field."""

from __future__ import annotations

import pytest

from control.core.actions import Dispatch, RunFinished, StepRetried
from control.core.types import BatchResult, Request, StepResult
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, RERANK, devices, make_core, single

DEVS = devices(2)
WHY = "input 'text' is not valid Unicode text: '\\ud800' at character 0 (a lone surrogate)"


def _core(model=EMBED, retries: int = 2):  # noqa: ANN001, ANN202
    wf = single(model)
    wf["nodes"][0]["retries"] = retries
    return make_core(FcfsTenancy(), devs=DEVS, replicas=[(model.key, "d000")], workflows=[wf])


def _dispatched(core, i: int, now: float, wf: str = "only-minilm") -> Dispatch:  # noqa: ANN001
    core.submit(Request(f"q{i}", "t1", wf, prompt_tokens=8), now)
    core.step(now)
    (d,) = core.step(now + 0.005).of_type(Dispatch)
    return d


def _next_dispatch(core, plan, now: float) -> Dispatch:  # noqa: ANN001
    """The first Dispatch of ``plan`` or of the steps after ``now`` (a batch may wait a bit)."""
    for i in range(1, 200):
        found = plan.of_type(Dispatch)
        if found:
            return found[0]
        plan = core.step(now + i * 0.005)
    raise AssertionError("nothing dispatched")


def test_bad_input_fails_the_run_at_once_naming_the_callers_field() -> None:
    core = _core()
    d = _dispatched(core, 1, 0.0)
    bad = StepResult(d.items[0].key, ok=False, error=WHY, fault="bad_input", field="text")
    core.complete(BatchResult(d.batch_id, 10, (bad,)), 0.01)
    plan = core.step(0.01)
    assert not plan.of_type(StepRetried)  # 2 retries left, none used: no retry can help
    (fin,) = plan.of_type(RunFinished)
    assert fin.status == "failed" and fin.fault == "bad_input" and fin.field == "inputs.text"
    assert "unusable input" in fin.error and "input 'text'" in fin.error
    # the device is not lost: the next run is dispatched to the same replica
    again = _dispatched(core, 2, 0.02)
    assert again.replica_id == d.replica_id


def test_an_element_of_a_list_input_is_named_with_its_index() -> None:
    core = _core(RERANK)
    d = _dispatched(core, 1, 0.0, "only-rerank")
    bad = StepResult(d.items[0].key, ok=False, error="input 'documents[3]' is not valid",
                     fault="bad_input", field="documents[3]")  # fmt: skip
    core.complete(BatchResult(d.batch_id, 10, (bad,)), 0.01)
    (fin,) = core.step(0.01).of_type(RunFinished)
    assert fin.fault == "bad_input" and fin.field == "inputs.docs[3]"


@pytest.mark.parametrize("fault", ["model_error", None])
def test_other_failures_are_still_retried_and_carry_no_fault(fault) -> None:  # noqa: ANN001
    core = _core(retries=1)
    d = _dispatched(core, 1, 0.0)
    failed = StepResult(d.items[0].key, ok=False, error="RuntimeError: boom", fault=fault)
    core.complete(BatchResult(d.batch_id, 10, (failed,)), 0.01)
    plan = core.step(0.01)
    assert plan.of_type(StepRetried) and not plan.of_type(RunFinished)
    retry = _next_dispatch(core, plan, 0.01)
    again = StepResult(retry.items[0].key, ok=False, error="RuntimeError: boom", fault=fault)
    core.complete(BatchResult(retry.batch_id, 10, (again,)), 0.03)
    (fin,) = core.step(0.03).of_type(RunFinished)
    assert fin.status == "failed" and fin.fault is None and fin.field is None
