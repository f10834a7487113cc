"""Breaker-aware routing (issue 24, item 7): a replica whose breaker the executor opened takes no
new work and its queued steps go to another replica; when its cooldown ends it takes one batch
at a time, the probe, until the breaker closes; a step refused because of it is retried
elsewhere without using the node's ``retries`` (a one-model call has none)."""

from __future__ import annotations

from control.core.actions import Dispatch, LoadModel, RunFinished, StepRetried
from control.core.events import ReplicaBreakerChanged
from control.core.types import BatchResult, Request, StepResult
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, devices, make_core, single

DEVS = devices(2)


def _core():  # noqa: ANN202
    return make_core(FcfsTenancy(), devs=DEVS, replicas=[(EMBED.key, "d000"), (EMBED.key, "d001")],
                     workflows=[single(EMBED)])  # fmt: skip


def _submit(core, ids, now: float) -> list[Dispatch]:  # noqa: ANN001
    for i in ids:
        core.submit(Request(f"q{i}", "t1", "only-minilm", prompt_tokens=8), now)
    out: list[Dispatch] = []
    for k in range(40):  # a batch may wait out its batching delay
        out.extend(core.step(now + k * 0.005).of_type(Dispatch))
    return out


def _ok(core, d: Dispatch, now: float) -> None:  # noqa: ANN001
    items = tuple(StepResult(i.key, ok=True, output_tokens=0) for i in d.items)
    core.complete(BatchResult(d.batch_id, 1000, items), now)


def _replica_state(core, rid: str) -> tuple[bool, str]:  # noqa: ANN001
    rec = core._st.cluster.replicas[rid]
    return rec.routable, rec.breaker


def test_an_open_replica_takes_no_work_until_its_probe_then_one_batch_at_a_time() -> None:
    core = _core()
    core.ingest(ReplicaBreakerChanged("r0", True, probe_in_s=5.0, reason="3 failures"), 0.0)
    core.step(0.0)
    assert _replica_state(core, "r0") == (False, "open")
    sent = _submit(core, range(6), 0.01)
    assert sent and {d.replica_id for d in sent} == {"r1"}  # never the open one
    for d in sent:
        _ok(core, d, 0.5)
    core.step(0.5)
    assert core.next_wakeup(0.5) == 5.0  # the driver is woken for the probe
    # the probe is due: r0 is routable again but takes one batch at a time
    core.step(5.0)
    assert _replica_state(core, "r0") == (True, "half_open")
    assert core._st.cluster.replicas["r0"].free_slots() > 0
    probe = [d for d in _submit(core, range(10, 30), 5.0) if d.replica_id == "r0"]
    assert len(probe) == 1, "one batch, the probe, while the breaker is half open"
    # the probe succeeded: the executor closes the breaker and r0 serves as before
    _ok(core, probe[0], 5.5)
    core.ingest(ReplicaBreakerChanged("r0", False, reason="probe succeeded"), 5.5)
    core.step(5.5)
    assert _replica_state(core, "r0") == (True, "closed")


def test_steps_queued_on_a_replica_whose_breaker_opens_move_to_another() -> None:
    core = make_core(FcfsTenancy(), devs=DEVS, replicas=[(EMBED.key, "d000")],
                     workflows=[single(EMBED)])  # fmt: skip
    for i in range(3):
        core.submit(Request(f"q{i}", "t1", "only-minilm", prompt_tokens=8), 0.0)
    core.step(0.0)
    queued = [s for s in core._st.cluster.replicas["r0"].queue.values()]
    running = core._st.cluster.replicas["r0"].running
    assert queued or running
    core.ingest(ReplicaBreakerChanged("r0", True, probe_in_s=5.0), 0.001)
    plan = core.step(0.001)
    assert not core._st.cluster.replicas["r0"].queue  # nothing waits behind the open breaker
    # the only replica is open: the model is loaded on a healthy device for the moved steps
    if queued:
        loads = plan.of_type(LoadModel)
        assert loads and loads[0].device_ids == ("d001",)


def test_a_probe_that_fails_opens_the_breaker_again() -> None:
    core = _core()
    core.ingest(ReplicaBreakerChanged("r0", True, probe_in_s=1.0), 0.0)
    core.step(0.0)
    core.step(1.0)
    assert _replica_state(core, "r0") == (True, "half_open")
    core.ingest(ReplicaBreakerChanged("r0", True, probe_in_s=1.0, reason="probe failed"), 1.1)
    core.step(1.1)
    assert _replica_state(core, "r0") == (False, "open")
    core.step(1.5)
    assert _replica_state(core, "r0") == (False, "open")  # the first timer is spent
    core.step(2.1)
    assert _replica_state(core, "r0") == (True, "half_open")


def test_a_step_refused_unavailable_is_retried_elsewhere_without_using_its_retries() -> None:
    core = _core()  # the one-node workflow has retries=0, as a one-model /v1 call
    (d,) = _submit(core, [1], 0.0)
    refused = StepResult(d.items[0].key, ok=False, fault="unavailable",
                         error="circuit open after 3 failures; probe in 4.0s")  # fmt: skip
    core.ingest(ReplicaBreakerChanged(d.replica_id, True, probe_in_s=5.0), 0.3)
    core.complete(BatchResult(d.batch_id, 0, (refused,)), 0.3)
    plan = core.step(0.3)
    assert plan.of_type(StepRetried) and not plan.of_type(RunFinished)
    retry = list(plan.of_type(Dispatch))
    for k in range(1, 40):
        retry.extend(core.step(0.3 + k * 0.005).of_type(Dispatch))
    assert retry and retry[0].replica_id != d.replica_id
    _ok(core, retry[0], 0.6)
    (fin,) = core.step(0.6).of_type(RunFinished)
    assert fin.status == "succeeded"


def test_a_breaker_report_for_an_unknown_replica_is_ignored() -> None:
    core = _core()
    core.ingest(ReplicaBreakerChanged("gone", True, probe_in_s=1.0), 0.0)
    core.step(0.0)
    assert _replica_state(core, "r0") == (True, "closed")
