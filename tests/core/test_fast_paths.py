"""The core's fast paths give the answers of the plain computations they replace.

Covered: ``StepPlan.phases`` grouped on first read, ``rooms_of`` against ``room`` per replica,
the cached cold-pool device list after a device changes pool, and steps that skip the placement
phase when nothing rolls out or scales to zero making the same decisions as steps that run it.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control.core.actions import PHASES, Dispatch, LoadModel, PhaseView, RunFinished, StepPlan
from control.core.binding import room, rooms_of
from control.core.binding_config import BindingConfig
from control.core.context import CoreConfig
from control.core.events import DeviceUp
from control.core.types import ReplicaState, Request
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, LLM, RAG, devices, latency, make_core, single
from tests.support.replay import Arrival, ReplayDriver, SimExecutor

DEVS = devices(4, 2)
TYPES = {d.device_id: d.accelerator for d in DEVS}


def _finished(i: int) -> RunFinished:
    return RunFinished(f"q{i}", "succeeded", {}, None, "every node finished")


@pytest.mark.parametrize(
    "tagged",
    [
        [],
        [("batching", _finished(1))],
        [("routing", _finished(1)), ("admission", _finished(2)), ("routing", _finished(3))],
        [(p, _finished(i)) for i, p in enumerate(reversed(PHASES))],
    ],
)
def test_phase_view_groups_actions_by_phase_in_plan_order(tagged) -> None:
    view = PhaseView(list(tagged))
    expected = {p: tuple(a for ph, a in tagged if ph == p) for p in PHASES}
    assert list(view) == list(PHASES)
    assert dict(view) == expected
    assert len(view) == len(PHASES)
    plan = StepPlan(0.0, tuple(a for _, a in tagged), view)
    assert plan.phases == expected  # a plain mapping compares equal


def test_plan_phases_of_a_busy_step_match_its_actions() -> None:
    core = make_core(FcfsTenancy(), devs=DEVS, replicas=[("minilm:1", "d000")],
                     workflows=[single(EMBED)])  # fmt: skip
    for i in range(20):
        core.submit(Request(f"q{i}", "t1", "only-minilm", prompt_tokens=64), 0.0)
    plan = core.step(0.0)
    grouped = [a for p in PHASES for a in plan.phases[p]]
    assert sorted(map(id, grouped)) == sorted(map(id, plan.actions))
    assert plan.phases["batching"] and all(type(a) is Dispatch for a in plan.phases["batching"])


_STATES = st.sampled_from([ReplicaState.READY, ReplicaState.LOADING, ReplicaState.FAILED])


@settings(max_examples=60, deadline=None)
@given(
    reps=st.lists(
        st.tuples(_STATES, st.booleans(), st.booleans(), st.floats(0, 0.01), st.integers(0, 10)),
        min_size=1, max_size=5,
    ),
    ahead_us=st.sampled_from([0, 2_000, 20_000]),
    per=st.integers(1, 3),
)  # fmt: skip
def test_rooms_of_equals_room_per_replica(reps, ahead_us, per) -> None:
    config = CoreConfig(binding=BindingConfig(max_local_batches=per, bind_ahead_us=ahead_us))
    devs = devices(len(reps))
    core = make_core(FcfsTenancy(), devs=devs, config=config,
                     replicas=[("minilm:1", d.device_id) for d in devs])  # fmt: skip
    state, now = core._st, 1.0
    pol, cluster = state.pol, state.cluster
    records = list(cluster.by_model["minilm:1"].values())
    for rec, (rstate, routable, busy, left_s, queued) in zip(records, reps, strict=True):
        rec.state, rec.routable = rstate, routable
        rec.running = {"b1": now + left_s} if busy else {}
        rec.busy_until = rec.ready_at = now + left_s
        rec.queue = {f"k{j}": None for j in range(queued)}  # only its length matters here
    expected = {r.replica_id: room(pol, r, now) for r in records if room(pol, r, now)}
    assert rooms_of(pol, cluster, "minilm:1", now) == expected
    assert list(rooms_of(pol, cluster, "minilm:1", now)) == list(expected)  # the same order


def test_cold_pool_cache_follows_a_device_that_changes_pool() -> None:
    devs = devices(3)  # all hot: a cold load has nowhere to go but the least-busy fallback
    core = make_core(FcfsTenancy(), devs=devs, replicas=[("minilm:1", "d000")],
                     workflows=[single(LLM)])  # fmt: skip
    assert core._st.cluster.cold_devices() == ()
    core.ingest(DeviceUp(replace(devs[2], pool="cold")), 0.0)
    assert [d.spec.device_id for d in core._st.cluster.cold_devices()] == ["d002"]
    core.submit(Request("q1", "t1", "only-smollm2", prompt_tokens=64), 0.0)
    (load,) = core.step(0.0).of_type(LoadModel)
    assert load.device_ids == ("d002",) and load.pool == "cold"


def _log(seed: int, n: int, every_phase: bool) -> list:
    core = make_core(FcfsTenancy(), devs=DEVS, replicas=[("minilm:1", "d000"),
                     ("rerank:1", "d001"), ("minilm:1", "d002")], workflows=[RAG], seed=seed)  # fmt: skip
    if every_phase:  # a scale-to-zero check far away: the placement phase runs on every step
        core._st.pol.config = CoreConfig(scale_to_zero_idle_s=1e9)
    rng = random.Random(seed)
    arrivals, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(40.0)
        req = Request(f"q{i}", rng.choice("ab"), "rag", prompt_tokens=rng.randint(16, 900),
                      max_output_tokens=rng.randint(1, 32))  # fmt: skip
        arrivals.append(Arrival(t, req))
    return ReplayDriver(core, SimExecutor(latency(), TYPES)).run(arrivals)


@pytest.mark.parametrize("seed", [0, 5])
def test_skipping_the_idle_placement_phase_changes_no_decision(seed) -> None:
    fast, full = _log(seed, 60, False), _log(seed, 60, True)
    assert fast == full
    assert sum(type(a) is RunFinished for _, a in fast) == 60
