"""The fidelity check's pieces without a real model: the in-worker profile against a fake
runtime, the rate that offers a target load, the twin side, figures, spread and notes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from control.core.latency import LatencyRow
from control.services.fidelity import (
    MODEL_KEY,
    FidelityConfig,
    Overheads,
    fidelity_scenario,
    rate_for_load,
    run_twin_detailed,
    slice_arrivals,
)
from control.services.fidelity.compare import breakdown, goal_met, spread
from control.services.fidelity.live import BatchLog, RequestSeen, _Session
from control.services.fidelity.validate import device_ratio, machine_note
from control.services.fidelity.world import offered_load
from sim.scenario import LatencyTables


def _table(fixed_us: int, per_token_us: int) -> tuple[LatencyRow, ...]:
    return tuple(
        LatencyRow(MODEL_KEY, "cpu", b, t, fixed_us + per_token_us * b * t)
        for b in (1, 2, 4, 8) for t in (8, 32, 64, 128)
    )  # fmt: skip


TABLE = _table(10_000, 300)


# ----- the in-worker profile, against a runtime that batches what arrives in one tick
@dataclass(frozen=True)
class _Usage:
    batch_size: int
    device_us: int


@dataclass(frozen=True)
class _Result:
    usage: tuple[_Usage, ...]
    ok: bool = True


class _Handle:
    def __init__(self, future: asyncio.Future) -> None:
        self._future = future

    async def result(self) -> _Result:
        return await self._future


class FakeRuntime:
    """Requests submitted in one loop tick form one batch whose device time is ``device_ms``
    (size, tokens, batch number); the driver adds ``busy_ms`` of its own around it."""

    def __init__(self, log: BatchLog, device_ms, busy_ms: float = 2.0) -> None:  # noqa: ANN001
        self.log, self.device_ms, self.busy_ms = log, device_ms, busy_ms
        self.pending: list[tuple[int, asyncio.Future]] = []
        self.batches = 0

    def submit_run(self, run) -> _Handle:  # noqa: ANN001
        loop = asyncio.get_running_loop()
        if not self.pending:
            loop.call_soon(self._flush)
        future = loop.create_future()
        self.pending.append((run.request.prompt_tokens, future))
        return _Handle(future)

    def _flush(self) -> None:
        size, tokens = len(self.pending), max(t for t, _ in self.pending)
        ms = self.device_ms(size, tokens, self.batches)
        self.batches += 1
        self.log.batch_done(MODEL_KEY, "cpu:0", size, ms, (ms + self.busy_ms) / 1000)
        for _, future in self.pending:
            future.set_result(_Result((_Usage(size, round(ms * 1000 / size)),)))
        self.pending = []


CFG = FidelityConfig(profile_batch_sizes=(1, 2, 4), profile_tokens=(8, 64), profile_repeats=3,
                     calibration_requests=2)  # fmt: skip


def _profile(device_ms) -> tuple[tuple[LatencyRow, ...], _Session]:  # noqa: ANN001
    log = BatchLog()
    template = slice_arrivals(fidelity_scenario(CFG, ()), CFG)[0].request
    session = _Session(FakeRuntime(log, device_ms), log, CFG, template)

    async def go() -> tuple[LatencyRow, ...]:
        await session.warm()
        return await session.profile("p")

    return asyncio.run(go()), session


def test_profile_rows_are_the_worker_batch_times_per_point():
    rows, session = _profile(lambda size, tokens, _: 5.0 + 0.1 * size * tokens)
    got = {(r.batch_size, r.tokens): r.latency_us for r in rows}
    assert got == {(b, t): round((5.0 + 0.1 * b * t) * 1000) for b in (1, 2, 4) for t in (8, 64)}
    assert session.overheads().busy_us == 2000  # dispatch-to-completion minus device time
    assert session.sigma_milli() == 0  # the same time every repeat: no scatter


def test_profile_takes_the_median_and_measures_the_scatter():
    # one batch in seven is 50% slower (never two of one point): the median ignores it, the
    # scatter does not
    rows, session = _profile(lambda size, tokens, n: (10.0 if n % 7 else 15.0) * size)
    assert {r.latency_us for r in rows if r.batch_size == 1} == {10_000}
    assert 100 < session.sigma_milli() < 400


# ----- scaling the slice to this machine
@settings(max_examples=15, deadline=None)
@given(per_token=st.integers(50, 2_000), target=st.sampled_from([0.3, 0.5, 0.7]))
def test_rate_offers_the_target_load(per_token, target):
    cfg = FidelityConfig(max_requests=60, target_utilization=target, max_slice_s=1e6)
    rows = _table(5_000, per_token)
    rate = rate_for_load(cfg, rows)
    load = offered_load(slice_arrivals(fidelity_scenario(cfg, rows, rate), cfg),
                        LatencyTables(rows).model())  # fmt: skip
    assert load == pytest.approx(target, rel=0.03)


def test_a_slow_machine_gets_a_higher_load_not_a_longer_check():
    rows = _table(50_000, 3_000)  # a slow device: the target load needs a long, slow slice
    free = FidelityConfig(max_requests=60, max_slice_s=1e6)
    capped = replace(free, max_slice_s=10.0)
    slow, fast = rate_for_load(free, rows), rate_for_load(capped, rows)
    span = slice_arrivals(fidelity_scenario(capped, rows, fast), capped)[-1].at
    assert fast > slow and span == pytest.approx(10.0, rel=0.02)


# ----- the twin side
def _slice(rate: float = 2.0, n: int = 60):
    cfg = FidelityConfig(max_requests=n)
    sc = fidelity_scenario(cfg, TABLE, rate)
    return sc, slice_arrivals(sc, cfg)


def test_twin_adds_the_run_overhead_beside_the_device():
    sc, reqs = _slice()
    base = run_twin_detailed(sc, reqs, Overheads(0, 0))
    more = run_twin_detailed(sc, reqs, Overheads(0, 3_000))
    assert set(base) == {a.request.request_id for a in reqs}
    for rid in base:  # off the busy path: every request exactly 3 ms later, nothing else moves
        assert more[rid].e2e_s == pytest.approx(base[rid].e2e_s + 0.003)
        assert more[rid].batch_size == base[rid].batch_size
    first = reqs[0].request  # alone: its batch's table time plus the batching delay
    assert base[first.request_id].device_ms == pytest.approx(
        (10_000 + 300 * first.prompt_tokens) / 1000
    )


def test_scattered_device_times_make_the_twin_wait_longer():
    sc, reqs = _slice(rate=3.0, n=120)
    still = run_twin_detailed(sc, reqs, Overheads(1_000, 0))
    noisy_sc = replace(sc, executor=replace(sc.executor, service_sigma_milli=400))
    noisy = run_twin_detailed(noisy_sc, reqs, Overheads(1_000, 0))
    wait = breakdown(still)["wait_ms_p99"], breakdown(noisy)["wait_ms_p99"]
    assert wait[1] > wait[0]


def test_device_ratio_is_one_when_the_table_predicts_every_batch():
    sc, reqs = _slice()
    seen = run_twin_detailed(sc, reqs, Overheads(0, 0))
    tokens = {a.request.request_id: a.request.prompt_tokens for a in reqs}
    assert device_ratio(seen, tokens, sc.latency.model()) == pytest.approx(1.0, abs=0.01)
    slower = {k: replace(s, device_ms=s.device_ms * 1.3) for k, s in seen.items()}
    assert device_ratio(slower, tokens, sc.latency.model()) == pytest.approx(1.3, abs=0.01)


# ----- figures
def test_breakdown_splits_device_time_from_waiting():
    seen = {"a": RequestSeen(0.050, 1, 30.0), "b": RequestSeen(0.100, 3, 60.0),
            "c": RequestSeen(0.200, 3, 60.0)}  # fmt: skip
    got = breakdown(seen)
    assert got["mean_batch_size"] == pytest.approx(7 / 3, abs=1e-3)
    assert got["device_ms_p50"] == 60.0 and got["wait_ms_p50"] == 40.0


@pytest.mark.parametrize(
    ("figures", "met"),
    [((0.05, 0.09, -1.9), True), ((0.11, 0.05, 0.0), False), ((0.05, 0.05, 2.5), False)],
)
def test_goal_is_ten_percent_and_two_points(figures, met):
    keys = ("p50_error", "p99_error", "slo_attainment_error_pp")
    assert goal_met(dict(zip(keys, figures, strict=True))) is met


def test_spread_reports_median_and_range_over_runs():
    runs = [
        {"p50_error": p, "p99_error": 2 * p, "slo_attainment_error_pp": -p} for p in (0.3, 0.1, 0.2)
    ]
    got = spread(runs)
    assert got["p50_error"] == {"median": 0.2, "min": 0.1, "max": 0.3}
    assert got["slo_attainment_error_pp"]["min"] == -0.3


@pytest.mark.parametrize(
    ("drift", "load", "needles"),
    [(1.05, 0.5, ["quiet"]), (1.3, 0.5, ["+30%"]), (0.95, 3.2, ["load average 3.2 on 2"])],
)
def test_machine_note_says_when_figures_are_noisy(drift, load, needles):
    note = machine_note(drift, load, cores=2)
    assert all(n in note for n in needles)
    assert note == "quiet" or note.startswith("noisy: ")


def test_replaying_the_twin_own_device_times_reproduces_it():
    from control.services.fidelity.twin import run_twin_replayed

    sc, reqs = _slice(rate=3.0, n=80)
    over = Overheads(1_500, 700)
    seen = run_twin_detailed(sc, reqs, over)
    same = run_twin_replayed(sc, reqs, over, {k: s.device_ms for k, s in seen.items()})
    assert same == pytest.approx({k: s.e2e_s for k, s in seen.items()}, abs=2e-6)
    slower = run_twin_replayed(sc, reqs, over, {k: 2 * s.device_ms for k, s in seen.items()})
    assert all(slower[k] > same[k] for k in same)
    assert sum(slower.values()) > 1.5 * sum(same.values())


def test_profile_leaves_the_worker_idle_between_batches():
    from control import clock

    started = clock.monotonic()
    _, session = _profile(lambda size, tokens, _: 4.0)  # the fake spends no real time
    walls = sum(b.wall_ms for b in session.log.batches[CFG.calibration_requests :]) / 1000
    assert clock.monotonic() - started >= walls * CFG.profile_idle_ratio


def test_repeated_validation_reports_medians_spread_and_the_middle_run():
    from control.services.fidelity import validate_repeated

    figures = iter([(0.05, 0.30, -1.0), (0.20, 0.08, 3.0), (0.07, 0.12, 0.5)])

    def fake(_cfg):  # noqa: ANN001, ANN202
        p50, p99, pp = next(figures)
        return {"p50_error": p50, "p99_error": p99, "slo_attainment_error_pp": pp,
                "live": {"p99_s": p99}, "twin": {}, "requests": 10, "machine": "quiet"}  # fmt: skip

    out = validate_repeated(None, 3, validate=fake)
    assert (out["p50_error"], out["p99_error"], out["slo_attainment_error_pp"]) == (0.07, 0.12, 0.5)
    assert out["spread"]["p99_error"] == {"median": 0.12, "min": 0.08, "max": 0.3}
    assert out["live"] == {"p99_s": 0.12} and len(out["runs"]) == 3
    assert out["goal_met"] is False  # the median p99 error is over 10%
    with pytest.raises(ValueError, match="runs=0"):
        validate_repeated(None, 0, validate=fake)


@pytest.mark.parametrize(
    ("field", "value"),
    [("max_requests", 1), ("rate_factor", 0.0), ("target_utilization", 1.0),
     ("profile_repeats", 0), ("profile_idle_ratio", -0.5), ("min_tokens", 2),
     ("max_slice_s", 0.0)],
)  # fmt: skip
def test_bad_settings_are_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        FidelityConfig(**{field: value})
