"""Continuous batching through the simulated executor and the twin driver, with hand-made
dispatches: moved completions, stale events, records, busy time, first tokens, device loss, and
the static path left as it was."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from control.core.actions import BatchItem, Dispatch, InputBinding, StepPlan
from control.core.events import DeviceDown
from control.core.latency import DecodeRow, FallbackProfile, TableLatencyModel
from control.core.tenancy.cost import CostModel
from control.core.types import BatchResult, DeviceSpec, InputRef, ModelSpec, Request
from sim.driver import Arrival, FleetEvent, TwinDriver
from sim.executor import SimExecutor, SimExecutorConfig
from sim.metrics import Recorder

KEY, FIXED, PER_SEQ = "llm:1", 700, 90
FB = FallbackProfile(fixed_us=2_000, per_token_us=20)  # forward: 2000 + 20 x batch x tokens
LAT = TableLatencyModel(decode=[DecodeRow(KEY, "h100", FIXED, PER_SEQ)], fallback=FB)
DEVICES = {
    "g0": DeviceSpec("g0", "n0", "gpu", "h100", 80_000, "nv0"),
    "g1": DeviceSpec("g1", "n0", "gpu", "h100", 80_000, "nv0"),
}
T0 = 1.0


def it(n: int) -> int:
    return FIXED + PER_SEQ * n


def prefill(n: int, tokens: int) -> int:
    return FB.fixed_us + FB.per_token_us * n * tokens


def model(continuous: bool = True) -> ModelSpec:
    return ModelSpec("llm", "1", "generate", 40_000, continuous_batching=continuous)


def item(rid: str, tokens: int, out: int, inputs=(), **kw) -> BatchItem:  # noqa: ANN001
    return BatchItem(
        f"{rid}/gen/0", rid, "gen", 0, None, rid, "generate", inputs, tokens, out, **kw
    )


def dispatch(bid: str, *items: BatchItem, replica: str = "r0") -> Dispatch:
    return Dispatch(bid, replica, KEY, None, ("g0",), items, 0, 0, "hand-made")


@dataclass
class PlannedCore:
    """Dispatches the planned batches at their instants; records what the driver hands it."""

    plan: list[tuple[float, Dispatch]]
    calls: list[tuple] = field(default_factory=list)
    results: dict[str, BatchResult] = field(default_factory=dict)

    def submit(self, req: Request, now: float) -> None:
        self.calls.append(("submit", req.request_id, now))

    def complete(self, result: BatchResult, now: float) -> None:
        self.calls.append(("complete", result.batch_id, now))
        self.results[result.batch_id] = result

    def ingest(self, event: object, now: float) -> None:
        self.calls.append(("ingest", type(event).__name__, now))

    def step(self, now: float) -> StepPlan:
        self.calls.append(("step", now))
        return StepPlan(now, tuple(d for t, d in self.plan if t == now), {})

    def next_wakeup(self, now: float) -> float | None:
        return None


def drive(plan, *, continuous=True, fleet=(), config=None):  # noqa: ANN001, ANN202
    ex = SimExecutor(LAT, DEVICES, {KEY: model(continuous)}, config or SimExecutorConfig())
    core = PlannedCore(plan)
    rec = Recorder(CostModel(), {"w": frozenset({"gen"})})
    driver = TwinDriver(core, ex, observer=rec)  # type: ignore[arg-type]
    arrivals = [Arrival(t, Request(i.request_id, "t", "w")) for t, d in plan for i in d.items]
    driver.run(arrivals, fleet_events=fleet)
    return core, rec, driver


A = dispatch("A", item("a1", 100, 10), item("a2", 100, 10))
B = dispatch("B", item("b1", 50, 4))
# B comes half-way through A's 4th decode iteration
B_AT_US = prefill(2, 100) + 3 * it(2) + it(2) // 2
PLAN = [(T0, A), (T0 + B_AT_US / 1e6, B)]


def test_a_joiner_moves_the_running_batch_and_each_completes_once_when_the_model_says() -> None:
    core, _, driver = drive(PLAN)
    boundary = prefill(2, 100) + 4 * it(2)
    b_first = boundary + prefill(1, 50)
    b_end = b_first + 4 * it(3)
    a_end = b_end + 2 * it(2)
    done = [c for c in core.calls if c[0] == "complete"]
    assert done == [("complete", "B", T0 + b_end / 1e6), ("complete", "A", T0 + a_end / 1e6)]
    assert core.results["A"].device_us == a_end
    assert core.results["B"].device_us == b_end - B_AT_US
    # A's first prediction (alone) went stale: nothing was recorded, so no step ran then
    alone = T0 + (prefill(2, 100) + 10 * it(2)) / 1e6
    assert ("step", alone) not in core.calls
    assert len(driver.executor.lanes) == 0  # both released once delivered


def test_records_of_a_joined_batch_count_from_its_dispatch_and_its_own_prefill() -> None:
    ex = SimExecutor(LAT, DEVICES, {KEY: model()}, SimExecutorConfig())
    ex.join(A, T0)
    b_now, moves = ex.join(B, T0 + B_AT_US / 1e6)
    assert [m[0] for m in moves] == ["B", "A"]
    a, b = ex.deliver(A), ex.deliver(B)
    assert b == b_now  # nothing joined after B
    b_first_ms = (prefill(2, 100) + 4 * it(2) + prefill(1, 50) - B_AT_US) / 1000
    assert [r.first_token_ms for r in b.records] == [b_first_ms]
    assert b.records[0].device_ms == b.duration_us / 1000
    assert [r.batch_size for r in b.records] == [3]  # its sequence and A's two
    assert [r.first_token_ms for r in a.records] == [prefill(2, 100) / 1000] * 2
    assert b.joined and a.joined


def test_busy_time_is_the_union_and_first_token_the_joiners_own_prefill_end() -> None:
    _, rec, _ = drive(PLAN)
    a_end = prefill(2, 100) + 4 * it(2) + prefill(1, 50) + 4 * it(3) + 2 * it(2)
    assert sum(rec.busy["g0"].values()) == _approx(a_end / 1e6)  # not A's + B's time
    b_first = T0 + (prefill(2, 100) + 4 * it(2) + prefill(1, 50)) / 1e6
    assert rec.requests["b1"].first_token == _approx(b_first)
    assert rec.requests["a1"].first_token == _approx(T0 + prefill(2, 100) / 1e6)


def test_a_failed_device_drops_the_running_batches_and_ends_the_busy_period() -> None:
    down_at = T0 + (B_AT_US + 5_000) / 1e6
    core, rec, driver = drive(PLAN, fleet=[FleetEvent(down_at, "down", "g0")])
    assert not [c for c in core.calls if c[0] == "complete"]
    assert ("ingest", DeviceDown.__name__, down_at) in core.calls
    assert sum(rec.busy["g0"].values()) == _approx(down_at - T0)
    assert len(driver.executor.lanes) == 0 and not driver._inflight


def test_after_a_failure_the_next_batch_starts_a_fresh_loop() -> None:
    late = dispatch("C", item("c1", 100, 10), item("c2", 100, 10), replica="r1")
    down_at = T0 + (B_AT_US + 5_000) / 1e6
    core, _, _ = drive(PLAN + [(5.0, late)], fleet=[FleetEvent(down_at, "down", "g0")])
    alone = SimExecutor(LAT, DEVICES, {KEY: model()}).run(late).duration_us
    assert [c for c in core.calls if c[0] == "complete"] == [("complete", "C", 5.0 + alone / 1e6)]


def test_a_lone_batch_takes_the_static_prediction_with_scatter_transfers_and_cache() -> None:
    cfg = SimExecutorConfig(service_sigma_milli=300, dispatch_overhead_us=250)
    ref = InputRef("a1", "embed", "vec", "g1", "e0")  # held on g1: a transfer to g0
    first = dispatch(
        "P", item("a1", 1500, 12, prefix_blocks=(7, 8, 9), inputs=(InputBinding("x", (ref,)),))
    )
    second = dispatch("Q", item("a2", 1400, 12, prefix_blocks=(7, 8)))  # hits the cache
    joined = SimExecutor(LAT, DEVICES, {KEY: model()}, cfg)
    static = SimExecutor(LAT, DEVICES, {KEY: model()}, cfg)
    for d, now in ((first, 2.0), (second, 3.0)):
        want = static.run(d)
        got, moves = joined.join(d, now)
        assert moves == [(d.batch_id, now + want.duration_us / 1e6)]
        assert replace(got, joined=False) == want
        assert replace(joined.deliver(d), joined=False) == want
    assert want.records[0].prefix_hit_tokens == 2 * 512


def test_models_without_the_flag_run_each_batch_alone_one_after_another() -> None:
    """A static replica's batch sent while another runs (dispatch ahead) waits for it: each
    takes its own predicted time, on one device, in order."""
    core, rec, _ = drive(PLAN, continuous=False)
    ex = SimExecutor(LAT, DEVICES, {KEY: model(False)})
    a, b = ex.run(A).duration_us, ex.run(B).duration_us
    done = sorted(c[1:] for c in core.calls if c[0] == "complete")
    a_end = T0 + a / 1e6
    assert PLAN[1][0] < a_end  # B was sent while A ran
    assert done == [("A", a_end), ("B", max(PLAN[1][0], a_end) + b / 1e6)]
    assert sum(rec.busy["g0"].values()) == _approx((a + b) / 1e6)  # counted per batch


def test_same_dispatches_same_run() -> None:
    def once():  # noqa: ANN202
        core, rec, driver = drive(PLAN + [(T0 + 0.0123, dispatch("C", item("c1", 300, 7)))])
        return core.calls, dict(rec.busy["g0"]), driver.events

    assert once() == once()


def _approx(x: float):  # noqa: ANN202
    import pytest

    return pytest.approx(x, abs=1e-9)


def _rag(continuous: bool) -> dict:
    from sim.scenario_io import read_scenario_dict

    raw = read_scenario_dict("rag_enterprise")
    raw.pop("variants", None)
    raw["workload"].update(max_requests=80, rate_factor=8.0)  # busy enough to overlap
    for m in raw["models"]:
        if m["task"] == "generate":
            m["continuous_batching"] = continuous
    return raw


def test_a_scenario_with_the_flag_replays_deterministically_without_double_busy_time() -> None:
    from sim.runner import run_seed
    from sim.scenario_io import scenario_from_dict

    sc = scenario_from_dict(_rag(True))
    assert [m.continuous_batching for m in sc.models if m.task == "generate"] == [True]
    a, b = (run_seed(sc, 1, keep_log=True, samples=5) for _ in range(2))
    assert a.driver.log == b.driver.log and a.recorder.requests == b.recorder.requests
    assert a.recorder.busy == b.recorder.busy
    llm = next(p.device_ids for p in sc.placement if p.model_key == "llama-70b:1")
    size = a.recorder.bucket_s
    for dev in llm:  # the LLM has these devices to itself: never busier than the wall clock
        assert all(v <= size + 1e-9 for v in a.recorder.busy[dev].values())
    done = [r for r in a.recorder.requests.values() if r.status == "succeeded"]
    assert done and all(r.first_token is not None and r.first_token <= r.end for r in done)
    assert not a.driver._inflight and len(a.driver.executor.lanes) == 0
