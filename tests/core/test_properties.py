"""Property tests over whole replays: exactly-once dispatch and ending, limits, determinism,
cold-load isolation."""

from __future__ import annotations

import zlib
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from control.core.actions import Dispatch, LoadModel, RunFinished, StepRetried
from control.core.batching.size_delay import SizeDelayConfig
from control.core.context import CoreConfig
from control.core.types import Request
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, LLM, MODELS, RAG, devices, latency, make_core, single
from tests.support.replay import Arrival, ReplayDriver, SimExecutor

DEVS = devices(4, 2)
TYPES = {d.device_id: d.accelerator for d in DEVS}
WORKFLOWS = [RAG, single(EMBED), single(LLM)]
WF_NAMES = ["rag", "only-minilm", "only-smollm2"]
MAX_DELAY = 0.004
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

arrival_lists = st.lists(
    st.tuples(
        st.floats(0, 0.2),
        st.integers(0, 2),
        st.integers(1, 3000),
        st.integers(0, 8),
        st.sampled_from([None, "s1", "s2"]),
    ),
    min_size=1,
    max_size=25,
)


def build(arrivals, fail_rate: int = 0, seed: int = 0, replicas=None):  # noqa: ANN001, ANN201
    reps = (
        replicas
        if replicas is not None
        else [
            ("minilm:1", "d000"),
            ("rerank:1", "d001"),
            ("smollm2:1", "d002"),
            ("smollm2:1", "d003"),
        ]
    )
    wfs = [dict(w, nodes=[dict(n, retries=1) for n in w["nodes"]]) for w in WORKFLOWS]
    cfg = CoreConfig(batching_config=SizeDelayConfig(max_queue_delay_s=MAX_DELAY))
    core = make_core(FcfsTenancy(), devs=DEVS, replicas=reps, workflows=wfs, config=cfg, seed=seed)

    def fail(item) -> str | None:  # noqa: ANN001
        return "injected" if zlib.crc32(item.key.encode()) % 100 < fail_rate else None

    ex = SimExecutor(latency(), TYPES, fail=fail)
    arr = [
        Arrival(
            at,
            Request(
                f"q{i}",
                f"t{i % 2}",
                WF_NAMES[w],
                prompt_tokens=tok,
                max_output_tokens=out,
                session_id=s,
                prefix_blocks=tuple(range(tok // 512)),
            ),
        )
        for i, (at, w, tok, out, s) in enumerate(arrivals)
    ]
    return core, ex, arr


@SETTINGS
@given(arrival_lists, st.integers(0, 60))
def test_each_attempt_dispatched_once_and_each_run_ends_once(arrivals, fail_rate) -> None:  # noqa: ANN001
    core, ex, arr = build(arrivals, fail_rate)
    log = ReplayDriver(core, ex).run(arr)
    keys = Counter(it.key for _, a in log if isinstance(a, Dispatch) for it in a.items)
    assert all(n == 1 for n in keys.values())
    ends = Counter(a.request_id for _, a in log if isinstance(a, RunFinished))
    assert set(ends) == {r.request.request_id for r in arr} and set(ends.values()) == {1}
    retried = {a.failed_key for _, a in log if isinstance(a, StepRetried)}
    assert retried <= set(keys)
    for _, a in log:
        if isinstance(a, RunFinished) and a.status == "succeeded":
            assert a.request_id not in {k.split("/")[0] for k in keys if k.endswith("/3")}


@SETTINGS
@given(arrival_lists)
def test_batches_within_limits_and_never_late_on_a_free_replica(arrivals) -> None:  # noqa: ANN001
    core, ex, arr = build(arrivals)
    models = {m.key: m for m in MODELS}
    problems: list[str] = []

    def check(now: float, plan) -> None:  # noqa: ANN001
        for d in plan.of_type(Dispatch):
            if d.model_key:
                m = models[d.model_key]
                assert len(d.items) <= m.max_batch_size
                longest = max(i.input_tokens for i in d.items)
                assert len(d.items) == 1 or longest * len(d.items) <= m.max_batch_tokens
        snap = core.snapshot()
        free = {r.replica_id for r in snap.replicas if r.state == "ready" and not r.running_batches}
        for rid, queue in snap.queues.items():
            if rid in free and queue:
                oldest = min(v.queued_since for v in queue)
                if now >= oldest + MAX_DELAY:  # the core's own deadline expression
                    problems.append(f"{rid} waited past max delay at {now}")

    ReplayDriver(core, ex, on_step=check).run(arr)
    assert problems == []


@SETTINGS
@given(arrival_lists, st.integers(0, 5))
def test_identical_inputs_and_seed_give_identical_decisions(arrivals, seed) -> None:  # noqa: ANN001
    logs = []
    for _ in range(2):
        core, ex, arr = build(arrivals, 20, seed)
        logs.append(ReplayDriver(core, ex).run(arr))
    assert logs[0] == logs[1]


@SETTINGS
@given(arrival_lists, st.lists(st.sampled_from(["minilm:1", "rerank:1", "smollm2:1"]), max_size=3))
def test_cold_loads_never_land_on_a_hot_device(arrivals, loaded) -> None:  # noqa: ANN001
    reps = [(m, f"d00{i}") for i, m in enumerate(loaded)]
    core, ex, arr = build(arrivals, replicas=reps)
    log = ReplayDriver(core, ex).run(arr)
    hot = {d.device_id for d in DEVS if d.pool == "hot"}
    loads = [a for _, a in log if isinstance(a, LoadModel)]
    assert all(a.pool == "cold" and not set(a.device_ids) & hot for a in loads)
    ends = Counter(a.status for _, a in log if isinstance(a, RunFinished))
    assert sum(ends.values()) == len(arr)


@SETTINGS
@given(arrival_lists)
def test_late_binding_never_leaves_work_pending_beside_a_free_replica(arrivals) -> None:  # noqa: ANN001
    core, ex, arr = build(arrivals)
    models = {m.key: m for m in MODELS}
    problems: list[str] = []

    def check(now: float, plan) -> None:  # noqa: ANN001
        snap = core.snapshot()
        for model_key, waiting in snap.pending.items():
            assert all(v.replica_id is None for v in waiting)
            for r in snap.replicas:
                free = r.state == "ready" and not r.running_batches
                if (
                    r.model_key == model_key
                    and free
                    and r.queue_len < models[model_key].max_batch_size
                ):
                    problems.append(
                        f"{len(waiting)} pending for {model_key} while {r.replica_id} is free"
                    )

    log = ReplayDriver(core, ex, on_step=check).run(arr)
    assert problems == []
    assert core.snapshot().pending == {}  # the replay drains: nothing is left unbound
    assert sum(isinstance(a, RunFinished) for _, a in log) == len(arr)
