"""A tiny OTLP/HTTP trace receiver on 127.0.0.1 for tests: it decodes each POSTed
``ExportTraceServiceRequest`` (protobuf, as the SDK's HTTP exporter sends it) and keeps its spans."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span


@dataclass
class Received:
    """What the receiver got: every span, with the service name of its resource."""

    spans: list[tuple[str, Span]] = field(default_factory=list)
    posts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def by_trace(self) -> dict[bytes, list[Span]]:
        with self.lock:
            out: dict[bytes, list[Span]] = {}
            for _, span in self.spans:
                out.setdefault(span.trace_id, []).append(span)
            return out


def _handler(received: Received) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            request = ExportTraceServiceRequest.FromString(body)
            with received.lock:
                received.posts += 1
                for rs in request.resource_spans:
                    service = next((a.value.string_value for a in rs.resource.attributes
                                    if a.key == "service.name"), "")  # fmt: skip
                    for ss in rs.scope_spans:
                        received.spans.extend((service, s) for s in ss.spans)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def otlp_receiver() -> Iterator[tuple[str, Received]]:
    """(its traces URL, what it received) while it serves on a free port of 127.0.0.1."""
    received = Received()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(received))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    finally:
        server.shutdown()
        server.server_close()
