"""OpenTelemetry export of request timelines: one trace per finished run, one span per step
attempt (a child of the run's span), sent over OTLP/HTTP to the collector users already run.

Off unless an endpoint is configured (``LEGATO_OTLP_ENDPOINT``). :meth:`RunTracer.on_settled`
is the inference service's ``on_settled`` hook: it builds the spans from the run's stored
timeline (:mod:`control.runtime.timeline`) with their real start and end instants and hands them
to a ``BatchSpanProcessor``, whose own thread exports them: the request path never waits on the
collector. The tracer has its own provider (the process-wide one is left alone).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from control.store.records import RequestRecord

log = logging.getLogger(__name__)

#: OTLP/HTTP's path for traces, added to an endpoint given without a path.
TRACES_PATH = "/v1/traces"


def traces_url(endpoint: str) -> str:
    """``endpoint`` as the exporter's URL: a bare ``http://host:4318`` gets ``/v1/traces``."""
    return endpoint.rstrip("/") + TRACES_PATH if urlsplit(endpoint).path in ("", "/") else endpoint


def _ns(at: datetime, plus_ms: float = 0.0) -> int:
    """Nanoseconds since the epoch of ``at`` (a UTC time without a zone, as rows keep them)."""
    aware = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return int(aware.timestamp() * 1e9) + int(plus_ms * 1e6)


def route_summary(decisions: list[Mapping[str, Any]], node: str, attempt: int) -> str:
    """The routing decision of a step attempt in one line: the choice and the candidates'
    predicted completions ("" when none was taken: bound late, or a host tool)."""
    for d in decisions:
        if d.get("kind") == "route" and d.get("node") == node and d.get("attempt") == attempt:
            scores = ", ".join(f"{c['replica']}={c['total_us']}us" for c in d.get("candidates", []))
            return f"{d.get('replica')}: {d.get('reason', '')} [{scores}]"
    return ""


def _step_attributes(record: RequestRecord, span: Mapping[str, Any], why: str) -> dict[str, Any]:
    attrs = {
        "legato.tenant_id": record.tenant_id, "legato.workflow": record.workflow_name,
        "legato.node": span["node"], "legato.model": span.get("model") or "",
        "legato.device": span.get("device") or "", "legato.replica": span.get("replica") or "",
        "legato.queue_wait_ms": float(span.get("queue_wait_ms", 0.0)),
        "legato.batch_wait_ms": float(span.get("batch_wait_ms", 0.0)),
        "legato.device_ms": float(span.get("device_ms", 0.0)),
        "legato.transfer_ms": float(span.get("transfer_ms", 0.0)),
        "legato.batch_size": int(span.get("batch_size", 1)),
        "legato.attempt": int(span.get("attempt", 0)),
        "legato.decision": why or str(span.get("batch_reason", "")),
    }  # fmt: skip
    return attrs


class RunTracer:
    """Exports finished runs' timelines; ``exporter`` is where spans go (the OTLP/HTTP exporter
    of ``endpoint`` by default). ``close`` flushes what is queued and stops the export thread."""

    def __init__(self, endpoint: str, service_name: str = "legato",
                 exporter: SpanExporter | None = None) -> None:  # fmt: skip
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        self.provider.add_span_processor(
            BatchSpanProcessor(exporter or OTLPSpanExporter(endpoint=traces_url(endpoint)))
        )
        self.tracer = self.provider.get_tracer("legato.runs")

    def on_settled(self, request_id: str, record: RequestRecord, usage: tuple) -> None:
        """The inference service's hook for a settled run: its trace (a run without a recorded
        timeline, e.g. refused before it ran, gets a root span alone)."""
        try:
            self.export(record)
        except Exception:  # tracing must never break settling a run
            log.exception("could not build the trace of run %s", request_id)

    def export(self, record: RequestRecord) -> None:
        """Queue the trace of ``record`` for export (returns at once)."""
        timeline = (record.result or {}).get("timeline") or {}
        spans, decisions = timeline.get("spans", []), timeline.get("decisions", [])
        total_ms = float(timeline.get("total_ms") or 0.0)
        admission = next((d for d in decisions if d.get("kind") == "admission"), {})
        root = self.tracer.start_span(
            f"run {record.workflow_name}", start_time=_ns(record.received_at),
            kind=trace.SpanKind.SERVER,
            attributes={"legato.run_id": record.id, "legato.tenant_id": record.tenant_id,
                        "legato.workflow": record.workflow_name,
                        "legato.version": record.workflow_version, "legato.status": record.status,
                        "legato.admission": str(admission.get("verdict", "")),
                        "legato.steps": len(spans)},
        )  # fmt: skip
        for d in decisions:
            if d.get("kind") in ("steal", "retry", "preempt"):
                root.add_event(f"{d['kind']} {d.get('node', '')}", {"reason": str(d.get("reason"))},
                               timestamp=_ns(record.received_at, float(d.get("at_ms", 0.0))))  # fmt: skip
        context = trace.set_span_in_context(root)
        for span in spans:
            why = route_summary(decisions, span["node"], int(span.get("attempt", 0)))
            child = self.tracer.start_span(
                f"step {span['node']}", context=context,
                start_time=_ns(record.received_at, float(span["ready_ms"])),
                attributes=_step_attributes(record, span, why),
            )  # fmt: skip
            if not span.get("ok", True):
                child.set_status(trace.StatusCode.ERROR, str(span.get("error") or "failed"))
            child.end(end_time=_ns(record.received_at, float(span["end_ms"])))
        root.end(end_time=_ns(record.received_at, total_ms))

    def close(self) -> None:
        self.provider.shutdown()
