"""Steps lost with their device are retried by the system, not out of the node's ``retries``.

Each case scripts what happens to successive attempts of the one node: ``lose`` (its device
goes down while the batch is in flight), ``fail`` (the executor reports an error) or ``ok``.
The replay driver carries out the core's decisions; a hook kills the dispatch's device.
"""

from __future__ import annotations

import pytest

from control.core.actions import Dispatch, RunFinished, StepRetried
from control.core.context import CoreConfig
from control.core.dag.run import CompiledDag, DagRun
from control.core.dag.spec import dag_from_dict
from control.core.events import DeviceDown
from control.core.types import BatchResult, Request, StepResult
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, RAG, devices, latency, make_core, single
from tests.support.replay import Arrival, ReplayDriver, SimExecutor

DEVS = devices(4, 2)
TYPES = {d.device_id: d.accelerator for d in DEVS}
HOT = [(EMBED.key, d.device_id) for d in DEVS[:4]]


def replay(script: list[str], retries: int, max_losses: int) -> list[tuple[float, object]]:
    """Run one request; attempt ``n`` behaves as ``script[n - 1]``. Returns the decision log."""
    wf = single(EMBED)
    wf["nodes"][0]["retries"] = retries
    config = CoreConfig(max_device_loss_retries=max_losses)
    core = make_core(FcfsTenancy(), devs=DEVS, replicas=HOT, workflows=[wf], config=config)

    def outcome(attempt: int) -> str:
        return script[attempt - 1] if attempt <= len(script) else "ok"

    executor = SimExecutor(
        latency(), TYPES, fail=lambda item: "boom" if outcome(item.attempt) == "fail" else None
    )
    driver: ReplayDriver

    def kill_on_dispatch(now: float, plan) -> None:  # noqa: ANN001
        for d in plan.of_type(Dispatch):
            if d.replica_id is not None and outcome(d.items[0].attempt) == "lose":
                # before the batch can complete (every model step takes >= 1 ms here)
                driver.schedule(now + 1e-5, DeviceDown(d.device_ids[0], "worker crashed"))

    driver = ReplayDriver(core, executor, on_step=kill_on_dispatch)
    return driver.run([Arrival(0.0, Request("q1", "t1", wf["workflow"], prompt_tokens=64))])


CASES = [
    # (name, script, retries, max_losses, status, attempts dispatched, error part)
    ("crash with retries=0 is retried", ["lose"], 0, 3, "succeeded", 2, None),
    ("losses up to the bound", ["lose", "lose", "lose"], 0, 3, "succeeded", 4, None),
    ("poison step stops at the bound", ["lose"] * 9, 5, 2, "failed", 3, "lost its device 3"),
    ("no loss retries allowed", ["lose"], 3, 0, "failed", 1, "limit 0"),
    ("a loss leaves retries for failures", ["lose", "fail"], 1, 3, "succeeded", 3, None),
    ("failures still use retries", ["lose", "fail", "fail"], 1, 3, "failed", 3, "after 3 attempt"),
    ("plain failure with retries=0", ["fail"], 0, 3, "failed", 1, "after 1 attempt"),
]


@pytest.mark.parametrize(
    ("name", "script", "retries", "max_losses", "status", "attempts", "error"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_device_loss_retries_are_bounded_apart_from_node_retries(
    name: str,
    script: list[str],
    retries: int,
    max_losses: int,
    status: str,
    attempts: int,
    error: str | None,
) -> None:
    log = replay(script, retries, max_losses)
    dispatches = [a for _, a in log if isinstance(a, Dispatch) and a.replica_id is not None]
    (finished,) = [a for _, a in log if isinstance(a, RunFinished)]
    assert finished.status == status
    assert len(dispatches) == attempts
    assert [d.items[0].attempt for d in dispatches] == list(range(1, attempts + 1))
    # one idempotency key across every attempt: the executor and ledger dedupe on it
    assert len({d.items[0].idempotency_key for d in dispatches}) == 1
    if error is None:
        assert finished.error is None
    else:
        assert finished.error is not None and error in finished.error
    # a retry after a loss never lands on a device that went down before it
    down: set[str] = set()
    for d in dispatches:
        assert d.device_ids[0] not in down
        if (script + ["ok"] * attempts)[d.items[0].attempt - 1] == "lose":
            down.add(d.device_ids[0])


def test_loss_retry_says_it_is_not_counted() -> None:
    log = replay(["lose"], 0, 3)
    (retried,) = [a for _, a in log if isinstance(a, StepRetried)]
    assert "worker crashed" in retried.reason and "not counted" in retried.reason
    assert retried.attempt == 2


def test_dag_run_loss_bound_rejects_negative_and_ignores_stale_keys() -> None:
    run = DagRun("r", CompiledDag(dag_from_dict(single(EMBED))), "idem")
    (step,) = run.take_ready()
    with pytest.raises(ValueError, match="max_losses"):
        run.on_step_lost(step.key, "x", -1)
    retry = run.on_step_lost(step.key, "x", 1)
    assert retry is not None and retry.losses == 1 and retry.attempt == 2
    assert run.on_step_lost(step.key, "x", 1) is None  # the lost attempt is no longer live
    assert run.status == "running"


def test_core_config_rejects_negative_bound() -> None:
    with pytest.raises(ValueError, match="max_device_loss_retries"):
        CoreConfig(max_device_loss_retries=-1)


@pytest.mark.parametrize("fault", ["worker_down", "unavailable"])
def test_a_host_tool_step_whose_worker_died_is_retried_without_using_its_retries(fault) -> None:  # noqa: ANN001
    """A ``vector_search`` step runs on an index replica the core does not place, so no
    ``DeviceDown`` fails it as lost: its own result says ``worker_down`` (or ``unavailable``:
    refused before it ran). It used to count as the node's failure, and a search (retries 0)
    failed its run when its worker died mid-burst."""
    core = make_core(FcfsTenancy(), devs=DEVS, replicas=[(EMBED.key, "d000")], workflows=[RAG])
    core.submit(Request("q1", "t1", "rag", prompt_tokens=16), 0.0)
    core.step(0.0)
    (embed,) = core.step(0.02).of_type(Dispatch)
    core.complete(BatchResult(embed.batch_id, 1000, (StepResult(embed.items[0].key),)), 0.03)
    (tool,) = core.step(0.03).of_type(Dispatch)
    assert tool.tool == "vector_search"
    died = StepResult(tool.items[0].key, ok=False, fault=fault,
                      error="worker cpu:1 down: actor died: ActorDiedError")  # fmt: skip
    core.complete(BatchResult(tool.batch_id, 0, (died,)), 0.04)
    plan = core.step(0.04)
    assert not plan.of_type(RunFinished)
    (retried,) = plan.of_type(StepRetried)
    assert "not counted as a retry" in retried.reason
    assert [d.tool for d in plan.of_type(Dispatch)] == ["vector_search"]  # the search again
