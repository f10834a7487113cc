"""The runtime's timeline notes (``control.runtime.timeline``) and the OTLP span building
(``control.services.run_tracing``), on hand-made dispatches and stored records: the parts of a
step's time, the batching hold only while its replica was free, routing decisions with their
candidates, bounded records, and one trace per run with one child span per step."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from control.api.settings import GatewaySettings
from control.core.actions import BatchItem, Dispatch, MoveStep, StepRetried
from control.core.routing.base import RouteChoice, RouteScore
from control.core.types import StepResult
from control.runtime.state import PendingBatch
from control.runtime.timeline import MAX_DECISIONS, RunTimeline, TimelineBook
from control.services.run_timeline import where_time_went
from control.services.run_tracing import RunTracer, traces_url
from control.store.records import RequestRecord
from control.wiring.gateway import run_tracer
from tests.support.otlp_receiver import otlp_receiver
from tests.support.timelines import TIMELINE

R0, R1 = RouteScore("r0", 900, 0, 900, 0, 0, 0, 0), RouteScore("r1", 2900, 2000, 900, 0, 0, 0, 0)
CHOICE = RouteChoice(R0, False, "lowest predicted completion 900 us on r0", (R0, R1))


def _item(
    node: str, ready: float, enqueued: float, route: RouteChoice | None = CHOICE
) -> BatchItem:
    return BatchItem(f"run1/{node}/1", "run1", node, 1, None, f"k-{node}", "embed", (), 4, 0,
                     ready_at=ready, enqueued_at=enqueued, route=route)  # fmt: skip


def _dispatch(batch: str, *items: BatchItem) -> Dispatch:
    return Dispatch(batch, "r0", "e:1", None, ("cpu:0",), items, 0, 0, "max delay reached")


def _book() -> tuple[TimelineBook, SimpleNamespace]:
    run = SimpleNamespace(submitted_at=100.0, timeline=RunTimeline())
    return TimelineBook({"run1": run}), run


def _send(book: TimelineBook, d: Dispatch, at: float, device_ms: float, back: float) -> None:
    book.dispatched(d, at)
    pb = PendingBatch(d, {i.idempotency_key: i for i in d.items}, at, "cpu:0", "r0")
    pb.device_ms = device_ms
    for item in d.items:
        book.step_done(pb, item, StepResult(item.key), back)
    book.batch_done(pb, back)


def test_a_span_splits_its_time_into_queue_batch_transfer_and_device() -> None:
    book, run = _book()
    _send(book, _dispatch("b1", _item("a", 100.000, 100.000)), 100.010, 2.0, 100.020)
    # the replica fell idle at 100.020; "b" is ready at 100.015 and queued until 100.030
    _send(book, _dispatch("b2", _item("b", 100.015, 100.015)), 100.030, 4.0, 100.040)
    a, b = run.timeline.spans
    assert (a["ready_ms"], a["dispatched_ms"], a["end_ms"]) == pytest.approx((0, 10, 20))
    assert (a["queue_wait_ms"], a["batch_wait_ms"]) == pytest.approx((10, 10))  # idle replica
    assert (a["device_ms"], a["transfer_ms"]) == pytest.approx((2, 8))
    assert b["queue_wait_ms"] == pytest.approx(15)
    assert b["batch_wait_ms"] == pytest.approx(10)  # held only since its replica fell idle
    assert (b["device"], b["replica"], b["batch_size"]) == ("cpu:0", "r0", 1)


def test_a_batch_sent_while_its_replica_is_busy_has_no_batching_hold() -> None:
    book, run = _book()
    book.dispatched(_dispatch("b1", _item("a", 100.0, 100.0)), 100.001)
    _send(book, _dispatch("b2", _item("b", 100.0, 100.0)), 100.005, 1.0, 100.010)
    assert run.timeline.spans[0]["batch_wait_ms"] == 0.0


def test_decisions_note_admission_routing_with_candidates_steals_and_retries() -> None:
    book, run = _book()
    book.dispatched(_dispatch("b1", _item("a", 100.0, 100.002), _item("b", 100.0, 100.002, None)),
                    100.003)  # fmt: skip
    book.moved(MoveStep("run1/a/1", "r0", "r1", "r1 idle: steals from r0"), 100.004)
    book.retried(StepRetried("run1/a/1", "run1/a/2", 2, "k-a", "timed out", "timeout"), 100.5)
    kinds = [d["kind"] for d in run.timeline.decisions]
    assert kinds == ["admission", "route", "route", "steal", "retry"]
    route = run.timeline.decisions[1]
    assert [c["replica"] for c in route["candidates"]] == ["r0", "r1"]
    assert route["candidates"][1]["queue_us"] == 2000 and route["at_ms"] == pytest.approx(2)
    assert "bound late to r0" in run.timeline.decisions[2]["reason"]
    assert run.timeline.decisions[3]["node"] == "a" and run.timeline.decisions[4]["attempt"] == 2


def test_a_runs_record_is_bounded() -> None:
    timeline = RunTimeline()
    for i in range(MAX_DECISIONS + 5):
        timeline.decide({"kind": "steal", "i": i})
    assert len(timeline.decisions) == MAX_DECISIONS and timeline.dropped == 5


def test_where_the_time_went_counts_parallel_steps_once_for_the_time_outside() -> None:
    spans = [{"ready_ms": 0, "end_ms": 10, "queue_wait_ms": 2, "batch_wait_ms": 1,
              "device_ms": 6, "transfer_ms": 2},
             {"ready_ms": 5, "end_ms": 12, "queue_wait_ms": 0, "batch_wait_ms": 0,
              "device_ms": 7, "transfer_ms": 0}]  # fmt: skip
    got = where_time_went(spans, 20.0)
    assert got["totals"] == {"queue_ms": 1, "batch_wait_ms": 1, "transfer_ms": 2,
                             "device_ms": 13, "outside_ms": 8}  # fmt: skip
    assert got["dominant"] == "device_ms" and got["summary"].startswith("device time dominated")


def _record(timeline: dict) -> RequestRecord:
    at = datetime(2026, 1, 2, 3, 4, 5)
    return RequestRecord("run-7", 3, None, "h", "w", "1", "succeeded", "standard", at, at, None,
                         at, None, {"timeline": timeline})  # fmt: skip


def test_one_trace_per_run_with_a_child_span_per_step_at_its_real_instants() -> None:
    exporter = InMemorySpanExporter()
    tracer = RunTracer("http://unused", "legato-unit", exporter=exporter)
    tracer.export(_record(TIMELINE))
    tracer.provider.force_flush()
    spans = exporter.get_finished_spans()
    root = next(s for s in spans if s.name == "run w")
    steps = [s for s in spans if s is not root]
    assert len(steps) == 1 and steps[0].parent.span_id == root.context.span_id
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert (steps[0].start_time - root.start_time, steps[0].end_time - root.start_time) == (
        1_000_000, 50_000_000)  # fmt: skip
    assert root.end_time - root.start_time == 60_000_000
    attrs = steps[0].attributes
    assert (attrs["legato.node"], attrs["legato.replica"], attrs["legato.batch_size"]) == (
        "embed", "e:1@cpu:0/r0", 2)  # fmt: skip
    assert "e:1@cpu:1/r1=5400us" in attrs["legato.decision"]
    assert root.resource.attributes["service.name"] == "legato-unit"
    tracer.close()


def test_the_traces_url_gets_the_otlp_path_only_when_it_has_none() -> None:
    assert traces_url("http://c:4318") == "http://c:4318/v1/traces"
    assert traces_url("http://c:4318/custom/traces") == "http://c:4318/custom/traces"


def test_without_an_endpoint_nothing_is_exported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LEGATO_OTLP_ENDPOINT", raising=False)
    with otlp_receiver() as (url, received):
        # OpenTelemetry's own variable points at a collector: Legato still exports nothing
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)
        assert run_tracer(GatewaySettings(_env_file=None)) is None
        monkeypatch.setenv("LEGATO_OTLP_ENDPOINT", url)
        tracer = run_tracer(GatewaySettings(_env_file=None))
        assert tracer is not None
        tracer.export(_record(TIMELINE))
        tracer.close()  # flushes: this one did go out
        assert received.posts == 1 and len(received.spans) == 2
