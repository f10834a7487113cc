"""Per-model autoscaling decisions (``control.core.autoscaler``): scale out on a predicted queue
delay above the target, within ``max_replicas``; scale in after ``idle_s``, down to
``min_replicas`` or to zero; drains that let queued and in-flight work finish."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest

from control.core.actions import Dispatch, DrainReplica, EvictReplica, LoadModel, RunFinished
from control.core.events import ModelRegistered
from control.core.types import ModelSpec, Request
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, MODELS, devices, latency, make_core, single
from tests.support.replay import Arrival, ReplayDriver, SimExecutor

DEVS = devices(3)  # hot pool only: routing's own cold-pool scale-out stays out of the way
TYPES = {d.device_id: d.accelerator for d in DEVS}


def scaled(**settings: object) -> ModelSpec:
    return replace(EMBED, **settings)


def world(model: ModelSpec, reps: int = 1, devs=DEVS):  # noqa: ANN001, ANN201
    placed = [(model.key, d.device_id) for d in list(devs)[:reps]]
    models = (model, *MODELS[1:])
    core = make_core(FcfsTenancy(), models, devs, placed, [single(model)], lat=latency(models))
    types = {d.device_id: d.accelerator for d in devs}
    return core, ReplayDriver(core, SimExecutor(latency(models), types))


def burst(n: int, at: float = 0.0, gap: float = 0.0002, tag: str = "q") -> list[Arrival]:
    return [
        Arrival(at + i * gap, Request(f"{tag}{i}", "t0", "only-minilm", prompt_tokens=128))
        for i in range(n)
    ]


def of(log, kind) -> list:  # noqa: ANN001
    return [(t, a) for t, a in log if isinstance(a, kind)]


def statuses(log) -> Counter:  # noqa: ANN001
    return Counter(a.status for _, a in log if isinstance(a, RunFinished))


def serving_over_time(log, start: int) -> list[int]:  # noqa: ANN001
    """Replicas loaded or loading after each load/evict, from ``start`` replicas."""
    counts, n = [], start
    for _, a in log:
        if isinstance(a, LoadModel):
            n += 1
        elif isinstance(a, EvictReplica):
            n -= 1
        else:
            continue
        counts.append(n)
    return counts


def test_a_backlog_above_the_target_delay_adds_a_replica_that_takes_work() -> None:
    model = scaled(max_replicas=2, scale_out_delay_s=0.05)
    _, driver = world(model)
    log = driver.run(burst(2000, gap=0.0001))
    loads = of(log, LoadModel)
    assert len(loads) == 1 and "predicted queue delay" in loads[0][1].reason
    assert loads[0][1].device_ids != ("d000",)  # a device that holds none of the model
    new = loads[0][1].replica_id
    assert any(a.replica_id == new for _, a in of(log, Dispatch))
    assert statuses(log) == Counter({"succeeded": 2000})


def test_without_settings_the_same_backlog_adds_nothing() -> None:
    _, driver = world(EMBED)
    log = driver.run(burst(2000, gap=0.0001))
    assert of(log, LoadModel) == [] and statuses(log) == Counter({"succeeded": 2000})


def test_scale_out_stops_at_max_replicas() -> None:
    model = scaled(max_replicas=2, scale_out_delay_s=0.001)
    _, driver = world(model)
    log = driver.run(burst(2000, gap=0.0001))
    assert max(serving_over_time(log, 1)) == 2
    assert statuses(log) == Counter({"succeeded": 2000})


def test_a_short_backlog_under_the_target_adds_nothing() -> None:
    model = scaled(max_replicas=3, scale_out_delay_s=5.0)
    _, driver = world(model)
    log = driver.run(burst(200))
    assert of(log, LoadModel) == []


def test_scale_in_after_idle_drains_down_to_min_replicas() -> None:
    model = scaled(min_replicas=1, max_replicas=3, scale_out_delay_s=0.02, idle_s=2.0)
    core, driver = world(model)
    log = driver.run(burst(2000, gap=0.0001))
    drains, evicts = of(log, DrainReplica), of(log, EvictReplica)
    assert len(of(log, LoadModel)) == 2 and len(drains) == 2 == len(evicts)
    assert all("had no work" in a.reason for _, a in drains)
    for t, drain in drains:  # each had no work for idle_s
        used = [u for u, a in of(log, Dispatch) if a.replica_id == drain.replica_id]
        assert t >= max(used, default=0.0) + 2.0
    assert drains[1][0] >= drains[0][0] + 2.0  # one replica per idle period
    assert len(core.snapshot().replicas) == 1
    assert statuses(log) == Counter({"succeeded": 2000})


def test_min_zero_scales_to_zero_and_the_next_request_cold_starts() -> None:
    model = scaled(min_replicas=0, max_replicas=1, idle_s=2.0)
    core, driver = world(model)
    log = driver.run(burst(5) + burst(1, at=10.0, tag="late"))
    evicts = of(log, EvictReplica)
    assert [round(t, 1) for t, _ in evicts][:1] == [2.0]
    assert [t for t, _ in of(log, LoadModel)] == [10.0]  # the cold start
    assert statuses(log) == Counter({"succeeded": 6})
    assert core.snapshot().cold_starts == 1
    assert len(evicts) == 2 and core.snapshot().replicas == ()  # zero again after it


def test_below_min_replicas_loads_up_to_min() -> None:
    model = scaled(min_replicas=3, max_replicas=3)
    core, driver = world(model)
    log = driver.run(burst(1))
    assert len(of(log, LoadModel)) == 2 and all("below its min" in a.reason
                                                for _, a in of(log, LoadModel))  # fmt: skip
    assert len(core.snapshot().replicas) == 3


def test_min_replicas_waits_for_the_first_ready_replica() -> None:
    """A live start-up's own replicas load unknown to the core: min_replicas loads nothing
    until the model has had a ready replica, then keeps it (here: after the cold start)."""
    model = scaled(min_replicas=2, max_replicas=2)
    core, driver = world(model, reps=0)
    driver.schedule(1.0, ModelRegistered(model))  # a step with nothing loaded: no load
    log = driver.run(burst(1, at=5.0))
    assert [t for t, _ in of(log, LoadModel)] == [5.0, 5.5]  # cold start, then up to min
    assert "below its min" in of(log, LoadModel)[1][1].reason


def test_lowering_max_drains_a_busy_replica_without_aborting_its_work() -> None:
    model = scaled(max_replicas=2)
    _, driver = world(model, reps=2)
    driver.schedule(0.05, ModelRegistered(replace(model, max_replicas=1)))
    log = driver.run(burst(600))
    (t_drain, drain), = of(log, DrainReplica)  # fmt: skip
    assert t_drain == pytest.approx(0.05) and "above its max_replicas 1" in drain.reason
    (t_evict, evict), = [(t, a) for t, a in of(log, EvictReplica)
                         if a.replica_id == drain.replica_id]  # fmt: skip
    assert t_evict > t_drain  # its batch in flight finished first
    after = [a for t, a in of(log, Dispatch) if t >= t_drain and a.replica_id == drain.replica_id]
    assert after == []  # no new work once draining
    assert statuses(log) == Counter({"succeeded": 600})


def test_max_replicas_caps_routings_own_cold_pool_scale_out() -> None:
    devs = devices(1, n_cold=2)
    uncapped = world(EMBED, devs=devs)[1].run(burst(2000, gap=0.0001))
    assert len(of(uncapped, LoadModel)) >= 1  # routing scales out on the cold pool by itself
    capped = world(scaled(max_replicas=1), devs=devs)[1].run(burst(2000, gap=0.0001))
    assert of(capped, LoadModel) == []
    assert statuses(capped) == Counter({"succeeded": 2000})


def test_scale_out_prefers_the_cold_pool() -> None:
    devs = devices(2, n_cold=1)
    model = scaled(max_replicas=2, scale_out_delay_s=0.05)
    log = world(model, devs=devs)[1].run(burst(2000, gap=0.0001))
    loads = of(log, LoadModel)
    assert loads and loads[0][1].pool == "cold"


@pytest.mark.parametrize(
    ("settings", "fields"),
    [
        ({"min_replicas": 3, "max_replicas": 2}, ("min_replicas", "max_replicas")),
        ({"min_replicas": -1, "max_replicas": 2}, ("min_replicas",)),
        ({"max_replicas": 0}, ("max_replicas",)),
        ({"max_replicas": 2, "scale_out_delay_s": 0.0}, ("scale_out_delay_s",)),
        ({"max_replicas": 2, "idle_s": -1.0}, ("idle_s",)),
    ],
)
def test_bad_settings_are_refused_naming_the_field(settings: dict, fields: tuple) -> None:
    with pytest.raises(ValueError) as err:
        scaled(**settings)
    for name in fields:
        assert name in str(err.value)
