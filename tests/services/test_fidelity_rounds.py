"""The fidelity check's noise controls without a real model: rounds bracketed by profile blocks,
the scatter measured across blocks, the twin's pooled draws, and the check's priority."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest

from control.core.latency import LatencyRow
from control.services.fidelity import (
    FidelityConfig,
    Overheads,
    fidelity_scenario,
    run_twin_detailed,
    run_twin_pooled,
    slice_arrivals,
)
from control.services.fidelity import validate as validate_mod
from control.services.fidelity.priority import Priority, schedstat, threads_of
from control.services.fidelity.records import LiveOutcome, RequestSeen, Round
from tests.services.test_fidelity_check import CFG, TABLE, _profile, _table


# ----- scatter across profile blocks
def _blocks(factors: list[float], repeats: int = 1):  # noqa: ANN202
    """A session that measured one profile block of ``repeats`` sweeps per factor, its device
    times ``5 + 0.1 x size x tokens`` ms times the block's factor."""
    import asyncio

    speed = {"factor": 1.0}
    _, session = _profile(lambda size, tokens, _n: (5.0 + 0.1 * size * tokens) * speed["factor"])
    session.cfg = replace(CFG, profile_repeats=repeats)
    session.blocks.clear()  # only the blocks below

    async def more() -> None:
        for k, factor in enumerate(factors):
            speed["factor"] = factor
            await session.profile(f"b{k}", warm_sweep=False)

    asyncio.run(more())
    return session


def test_one_sweep_blocks_measure_scatter_between_blocks():
    # one sample per point per block: the spread shows only around the mean of two blocks
    # (the table of the round between them); 0.8 and 1.2 around 1.0 are log(0.8), log(1.2)
    session = _blocks([0.8, 1.2, 0.8], repeats=1)
    assert all(len(ms) == 1 for b in session.blocks for ms in b.values())
    assert 250 < session.sigma_milli() < 320


def test_steady_blocks_have_no_scatter():
    assert _blocks([1.0, 1.0, 1.0], repeats=1).sigma_milli() == 0
    assert _blocks([1.0, 1.0], repeats=2).sigma_milli() == 0


def test_scatter_grows_with_the_drift_between_blocks():
    small = _blocks([0.95, 1.05, 0.95]).sigma_milli()
    large = _blocks([0.7, 1.3, 0.7]).sigma_milli()
    assert 0 < small < large


def test_round_table_pools_the_samples_of_its_two_blocks():
    # one slow sample (a batch the host interrupted) must not move the round's table as a mean
    # of the blocks' medians would ((1 + 2) / 2 = 1.5 ms); the pooled median stays at 1 ms
    _, session = _profile(lambda size, tokens, _n: 1.0)
    session.blocks[:] = [{(1, 8): [1.0, 1.0], (2, 8): [2.0, 2.0]},
                         {(1, 8): [1.0, 3.0], (2, 8): [2.0, 2.2]},
                         {(1, 8): [9.0, 9.0]}]  # fmt: skip
    rows = {(r.batch_size, r.tokens): r.latency_us for r in session.table_between(0, 1)}
    assert rows == {(1, 8): 1000, (2, 8): 2000}
    # the next round pools blocks 1 and 2 only, and keeps a point only one of them measured
    rows = {(r.batch_size, r.tokens): r.latency_us for r in session.table_between(1, 2)}
    assert rows == {(1, 8): 6000, (2, 8): 2100}


# ----- the twin's pooled draws
def _slice(rate: float = 3.0, n: int = 80):  # noqa: ANN202
    cfg = FidelityConfig(max_requests=n)
    sc = fidelity_scenario(cfg, TABLE, rate)
    return sc, slice_arrivals(sc, cfg)


def test_pooled_draws_differ_only_in_the_scatter_seed():
    sc, reqs = _slice()
    noisy = replace(sc, executor=replace(sc.executor, service_sigma_milli=200))
    runs = run_twin_pooled(noisy, reqs, Overheads(1_000, 500), 4)
    assert len(runs) == 4 and all(set(r) == set(runs[0]) for r in runs)
    assert len({tuple(round(s.e2e_s, 9) for s in r.values()) for r in runs}) == 4
    first = run_twin_detailed(noisy, reqs, Overheads(1_000, 500))
    assert runs[0] == first  # draw 0 is the scenario's own seed
    still = run_twin_pooled(sc, reqs, Overheads(1_000, 500), 4)
    assert len(still) == 1  # without scatter every draw is the same replay


# ----- the whole comparison over rounds, with a stand-in live session
def _between(a: tuple[LatencyRow, ...], b: tuple[LatencyRow, ...]) -> tuple[LatencyRow, ...]:
    """The round table of two one-sample blocks (``_Session.table_between``: their mean)."""
    other = {(r.batch_size, r.tokens): r.latency_us for r in b}
    return tuple(replace(r, latency_us=round((r.latency_us + other[(r.batch_size, r.tokens)]) / 2))
                 for r in a)  # fmt: skip


def _outcome(tables: list[tuple[LatencyRow, ...]], slowdown: float, cfg: FidelityConfig):
    """A live session whose rounds ran exactly as the twin predicts with the round's table,
    times ``slowdown``; ``tables`` are the profile blocks (one more than the rounds)."""
    rounds = []
    for k in range(len(tables) - 1):
        table = _between(tables[k], tables[k + 1])
        sc = fidelity_scenario(cfg, table, 3.0)
        reqs = [replace(a, request=replace(a.request, request_id=f"{a.request.request_id}~{k}"))
                for a in slice_arrivals(sc, cfg)]  # fmt: skip
        seen = run_twin_detailed(sc, reqs, Overheads(1_000, 500))
        seen = {rid: RequestSeen(s.e2e_s * slowdown, s.batch_size, s.device_ms * slowdown)
                for rid, s in seen.items()}  # fmt: skip
        rounds.append(Round(table, reqs, seen))
    return LiveOutcome(tuple(tables), tuple(rounds), Overheads(1_000, 500), 0, 3.0)


@pytest.mark.parametrize(("slowdown", "exact"), [(1.0, True), (1.3, False)])
def test_each_round_is_compared_with_the_table_around_it(monkeypatch, slowdown, exact):
    cfg = FidelityConfig(max_requests=40, slo_s=0.06)
    # the machine slows down between blocks: a single table would mispredict some round
    tables = [_table(10_000, 300), _table(10_000, 450), _table(10_000, 600)]
    live = _outcome(tables, slowdown, cfg)
    monkeypatch.setattr(validate_mod, "run_live", lambda _cfg: live)
    out = validate_mod.validate_fidelity(cfg)
    assert out["rounds"] == 2 and out["requests"] == 80
    assert out["live"]["succeeded"] == 80
    errors = (out["p50_error"], out["p99_error"], abs(out["slo_attainment_error_pp"]))
    if exact:
        assert errors == (0.0, 0.0, 0.0) and out["goal_met"]
        assert out["round_device_ratio"] == [1.0, 1.0]
    else:
        assert errors[0] > 0.1 and errors[1] > 0.1 and not out["goal_met"]
        assert out["device_ratio"]["live"] == pytest.approx(1.3, abs=0.01)
    # the diagnostic twin given the live device times is left with the waiting only
    assert out["replayed_device_errors"]["p50_error"] < errors[0] + 1e-9


# ----- priority of the check's own threads
def test_threads_of_lists_this_process_and_schedstat_counts_time():
    assert os.getpid() in threads_of(os.getpid())
    if not os.path.exists(f"/proc/{os.getpid()}/schedstat"):
        pytest.skip("no /proc schedstat here")
    run_ms, wait_ms = schedstat(os.getpid())  # type: ignore[misc]
    assert run_ms > 0 and wait_ms >= 0


@pytest.fixture
def child():  # noqa: ANN201
    # its own session, so raising its autogroup leaves the test runner's alone
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)  # fmt: skip
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="no setpriority here")
def test_priority_is_raised_then_put_back(child):
    before = os.getpriority(os.PRIO_PROCESS, child)
    prio = Priority(-5)
    if not prio.raise_(child):  # not allowed to raise priorities: nothing changed
        assert os.getpriority(os.PRIO_PROCESS, child) == before
        return
    assert os.getpriority(os.PRIO_PROCESS, child) == -5
    prio.restore()
    assert os.getpriority(os.PRIO_PROCESS, child) == before


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="putting a lowered priority back"
)
def test_a_refused_raise_changes_nothing(child, monkeypatch):
    before = os.getpriority(os.PRIO_PROCESS, child)
    calls = []

    def refuse_second(which, who, value):  # noqa: ANN001, ANN202
        calls.append(value)
        if len(calls) == 2:
            raise PermissionError("not allowed")
        return real(which, who, value)

    real = os.setpriority
    monkeypatch.setattr(os, "setpriority", refuse_second)
    prio = Priority(5)  # lowering is always allowed: the refusal comes from the stand-in
    assert prio.raise_(child) is True  # the first call went through
    assert prio.raise_(child) is False and not prio.applied
    monkeypatch.setattr(os, "setpriority", real)
    assert os.getpriority(os.PRIO_PROCESS, child) == before  # the first change was undone
