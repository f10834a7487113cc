"""Canary traffic splits in the core: the split follows the fraction and is stable per request
id, a canary worse than its baseline (errors or p99) is rolled back with its replicas drained and
no request lost, an operator can end one, and misuse is refused naming the bad part."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import pytest

from control.core.actions import CanaryTransition, Dispatch, EvictReplica, LoadModel, RunFinished
from control.core.canary_stats import PPM, CanaryConfig, VariantStats, in_control, verdict
from control.core.context import CoreConfig
from control.core.errors import InvalidCanaryError, UnknownModelError
from control.core.events import CanaryChanged, ReplicaBreakerChanged
from control.core.types import BatchResult, ModelSpec, Request
from tests.core.fakes import FcfsTenancy
from tests.support.builders import EMBED, MODELS, devices, latency, make_core, single
from tests.support.replay import Arrival, ReplayDriver, SimExecutor

DEVS = devices(2)
TYPES = {d.device_id: d.accelerator for d in DEVS}
EMBED2 = ModelSpec("minilm", "2", "embed", 100, max_batch_size=8, max_batch_tokens=4096)
FAST = CanaryConfig(min_samples=10, window=50)


@dataclass
class CanaryExecutor(SimExecutor):
    """A simulated executor whose batches on the canary version fail or run ``slow`` x longer."""

    canary_fails: bool = False
    slow: int = 1

    def duration_us(self, d: Dispatch) -> int:
        base = super().duration_us(d)
        return base * self.slow if d.model_key == EMBED2.key else base

    def result(self, d: Dispatch) -> BatchResult:
        res = super().result(d)
        if d.model_key != EMBED2.key or not self.canary_fails:
            return res
        items = tuple(replace(i, ok=False, error="IndexError: position out of range")
                      for i in res.items)  # fmt: skip
        return replace(res, items=items)


def world(config: CanaryConfig = FAST, **executor):  # noqa: ANN003, ANN201
    models = (*MODELS, EMBED2)
    core = make_core(FcfsTenancy(), models, DEVS, [(EMBED.key, "d000")], [single(EMBED)],
                     config=CoreConfig(canary=config), lat=latency(models))  # fmt: skip
    ex = CanaryExecutor(latency(models), TYPES, **executor)
    return core, ReplayDriver(core, ex)


def stream(n: int, gap: float, start: float = 0.5, prefix: str = "q") -> list[Arrival]:
    return [Arrival(start + i * gap, Request(f"{prefix}{i}", "t0", "only-minilm",
                                             prompt_tokens=128)) for i in range(n)]  # fmt: skip


def served(log) -> Counter:  # noqa: ANN001
    return Counter(a.model_key for _, a in log if isinstance(a, Dispatch) for _ in a.items)


def canary_states(log) -> list[str]:  # noqa: ANN001
    return [a.to_state for _, a in log if isinstance(a, CanaryTransition)]


def test_healthy_canary_takes_its_fraction_and_keeps_it() -> None:
    core, driver = world()
    driver.schedule(0.0, CanaryChanged(EMBED.key, EMBED2.key, PPM // 5))
    log = driver.run(stream(1000, 0.004))
    assert Counter(a.status for _, a in log if isinstance(a, RunFinished)) == {"succeeded": 1000}
    share = served(log)[EMBED2.key] / sum(served(log).values())
    assert abs(share - 0.2) < 0.04
    assert canary_states(log) == ["running"]
    view = core.snapshot().canaries[EMBED.key]
    assert (view.state, view.fraction_ppm, view.canary_key) == ("running", PPM // 5, EMBED2.key)
    assert view.canary.requests + view.baseline.requests == 1000
    assert view.canary.errors == view.baseline.errors == 0


def test_the_variant_of_a_request_id_is_stable() -> None:
    picks = []
    for _ in range(2):
        core, driver = world()
        driver.schedule(0.0, CanaryChanged(EMBED.key, EMBED2.key, PPM // 2))
        log = driver.run(stream(200, 0.01))
        picks.append({i.key.split("/")[0]: a.model_key for _, a in log
                      if isinstance(a, Dispatch) for i in a.items})  # fmt: skip
    assert picks[0] == picks[1] and set(picks[0].values()) == {EMBED.key, EMBED2.key}


def test_failing_canary_is_rolled_back_and_no_request_is_lost() -> None:
    core, driver = world(canary_fails=True)
    driver.schedule(0.0, CanaryChanged(EMBED.key, EMBED2.key, PPM // 2))
    log = driver.run(stream(300, 0.01))
    assert Counter(a.status for _, a in log if isinstance(a, RunFinished)) == {"succeeded": 300}
    assert canary_states(log) == ["running", "rolled_back"]
    back_at, back = next((t, a) for t, a in log
                         if isinstance(a, CanaryTransition) and a.to_state == "rolled_back")  # fmt: skip
    assert "error rate 100.0%" in back.reason and back.fraction_ppm == 0
    assert dict(back.figures)["canary_error_rate"] == 1.0
    assert not [a for t, a in log if isinstance(a, Dispatch) and t > back_at
                and a.model_key == EMBED2.key]  # fmt: skip
    loaded = {
        a.replica_id for _, a in log if isinstance(a, LoadModel) and a.model_key == EMBED2.key
    }
    evicted = {a.replica_id for _, a in log if isinstance(a, EvictReplica)}
    assert loaded and loaded <= evicted
    view = core.snapshot().canaries[EMBED.key]
    assert (view.state, view.fraction_ppm, view.draining) == ("rolled_back", 0, ())
    assert view.canary.errors == view.canary.requests >= FAST.min_samples
    assert not [r for r in core.snapshot().replicas if r.model_key == EMBED2.key]


@pytest.mark.parametrize(("min_delta_s", "states"),
                         [(0.0, ["running", "rolled_back"]), (0.05, ["running"])])  # fmt: skip
def test_slow_canary_is_rolled_back_on_p99_past_the_minimum_delta(min_delta_s, states) -> None:  # noqa: ANN001
    _, driver = world(replace(FAST, p99_min_delta_s=min_delta_s), slow=5)
    driver.schedule(0.0, CanaryChanged(EMBED.key, EMBED2.key, PPM // 2))
    log = driver.run(stream(300, 0.02))
    assert canary_states(log) == states  # 5x slower, but a few ms: under a 50 ms minimum
    back = [a for _, a in log if isinstance(a, CanaryTransition)][-1]
    assert back.reason.startswith("canary p99") == (len(states) == 2)


def test_operator_ends_a_canary_and_its_replica_goes() -> None:
    core, driver = world()
    driver.schedule(0.0, CanaryChanged(EMBED.key, EMBED2.key, PPM // 2))
    driver.schedule(1.5, CanaryChanged(EMBED.key, EMBED2.key, 0, "operator ends it"))
    log = driver.run(stream(200, 0.01))
    assert canary_states(log) == ["running", "ended"]
    ended_at = next(t for t, a in log if isinstance(a, CanaryTransition) and a.to_state == "ended")
    late = [a for t, a in log if isinstance(a, Dispatch) and t > ended_at]
    assert late and all(a.model_key == EMBED.key for a in late)
    assert core.snapshot().canaries[EMBED.key].state == "ended"


@pytest.mark.parametrize(
    ("event", "error", "field"),
    [
        (CanaryChanged("nope:1", EMBED2.key, 1), UnknownModelError, None),
        (CanaryChanged(EMBED.key, "nope:2", 1), UnknownModelError, None),
        (CanaryChanged(EMBED.key, EMBED.key, 1), InvalidCanaryError, "canary_key"),
        (CanaryChanged(EMBED.key, EMBED2.key, PPM + 1), InvalidCanaryError, "fraction_ppm"),
        (CanaryChanged(EMBED.key, EMBED2.key, -1), InvalidCanaryError, "fraction_ppm"),
    ],
)
def test_misuse_is_refused_naming_the_part(event, error, field) -> None:  # noqa: ANN001
    core, _ = world()
    with pytest.raises(error) as raised:
        core.ingest(event, 0.0)
    if field is not None:
        assert raised.value.field == field
    assert not core.snapshot().canaries


def _stats(key: str, outcomes: list[tuple[bool, float]]) -> VariantStats:
    s = VariantStats(key, 100)
    for ok, lat in outcomes:
        s.observe(ok, lat)
    return s


@pytest.mark.parametrize(
    ("baseline", "canary", "expected"),
    [
        ([(True, 0.01)] * 20, [(False, 0.01)] * 19, None),  # too few canary samples
        ([(True, 0.01)] * 20, [(False, 0.01)] * 20, "error rate"),
        ([(True, 0.01)] * 20, [(True, 0.01)] * 19 + [(False, 0.01)], None),  # 5%: within 5%
        ([(True, 0.01)] * 20, [(True, 0.01)] * 18 + [(False, 0.01)] * 2, "error rate"),
        ([(True, 0.01)] * 20, [(True, 0.019)] * 20, None),  # p99 within +100%
        ([(True, 0.1)] * 20, [(True, 0.21)] * 20, "p99"),
        ([(True, 0.01)] * 20, [(True, 0.059)] * 20, None),  # +490% but under 50 ms more
        ([(True, 0.01)] * 20, [(True, 0.061)] * 20, "p99"),
        ([(False, 0.01)] * 20, [(False, 0.01)] * 20, None),  # no worse than the baseline
    ],
)
def test_verdict(baseline, canary, expected) -> None:  # noqa: ANN001
    why = verdict(CanaryConfig(min_samples=20, window=100), _stats("b", baseline),
                  _stats("c", canary))  # fmt: skip
    assert (why is None) if expected is None else (why is not None and why.startswith(expected))


def test_config_refuses_bad_margins() -> None:
    with pytest.raises(ValueError, match="error_margin"):
        CanaryConfig(error_margin=-0.1)
    with pytest.raises(ValueError, match="window"):
        CanaryConfig(min_samples=50, window=10)


def test_a_canary_that_cannot_load_is_rolled_back() -> None:
    fail = lambda a: "config is broken" if a.model_key == EMBED2.key else None  # noqa: E731
    core, driver = world(fail_load=fail)
    driver.schedule(0.0, CanaryChanged(EMBED.key, EMBED2.key, PPM // 2))
    log = driver.run(stream(100, 0.01))
    assert Counter(a.status for _, a in log if isinstance(a, RunFinished)) == {"succeeded": 100}
    assert canary_states(log) == ["running", "rolled_back"]
    assert "load failed: config is broken" in core.snapshot().canaries[EMBED.key].reason


def test_a_canary_whose_breaker_opens_is_rolled_back() -> None:
    core, driver = world()

    def on_step(now: float, plan) -> None:  # noqa: ANN001
        for a in plan.actions:
            if isinstance(a, LoadModel) and a.model_key == EMBED2.key:
                opened = ReplicaBreakerChanged(a.replica_id, True, 5.0, "3 batches failed")
                driver.schedule(now + 2.0, opened)

    driver.on_step = on_step
    driver.schedule(0.0, CanaryChanged(EMBED.key, EMBED2.key, PPM // 2))
    log = driver.run(stream(300, 0.01))
    assert Counter(a.status for _, a in log if isinstance(a, RunFinished)) == {"succeeded": 300}
    assert canary_states(log) == ["running", "rolled_back"]
    view = core.snapshot().canaries[EMBED.key]
    assert "breaker of" in view.reason and "3 batches failed" in view.reason
    assert view.canary.errors == 0  # the open breaker alone is the verdict


def test_the_baseline_is_judged_on_a_control_cohort_as_large_as_the_canary() -> None:
    core, driver = world(CanaryConfig(min_samples=10, window=1000))
    driver.schedule(0.0, CanaryChanged(EMBED.key, EMBED2.key, PPM // 5))
    driver.run(stream(1000, 0.004))
    view = core.snapshot().canaries[EMBED.key]
    assert view.baseline.requests > 3 * view.canary.requests  # every baseline step counted
    assert abs(view.baseline.samples - view.canary.samples) < 0.3 * view.canary.samples
    assert [in_control(p, 200) for p in (199, 200, 399, 400)] == [False, True, True, False]
    assert in_control(PPM - 1, PPM // 2 + 1) and not in_control(0, PPM)
