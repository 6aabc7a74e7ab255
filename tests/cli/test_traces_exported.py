"""A real ``kbctl ingest`` process sends its spans over OTLP/HTTP (the extra ``kbctl[otel]``) to a
collector on loopback, set by the standard variables, in the trace of its ``TRACEPARENT``."""

from __future__ import annotations

import gzip
import http.server
import threading
from typing import ClassVar

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")


class _Collector(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[bytes]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        type(self).received.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_an_ingest_process_exports_its_spans_to_an_otlp_collector(cli_process):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    server = http.server.HTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    try:
        p = cli_process(
            "-p", "hash-384", "ingest", "sample_corpus/support/billing", "-n", "billing_kb",
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
                "OTEL_SERVICE_NAME": "kbctl-test",
                "TRACEPARENT": f"00-{trace_id}-{span_id}-01",
            },
        )  # fmt: skip
    finally:
        server.shutdown()
    assert p.returncode == 0, p.stderr.decode()
    spans, services = [], set()
    for body in _Collector.received:
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            services |= {a.value.string_value for a in rs.resource.attributes if a.key == "service.name"}
            spans += [s for ss in rs.scope_spans for s in ss.spans]
    names = {s.name for s in spans}
    assert {"kbctl.ingest", "kbctl.ingest.fetch", "kbctl.ingest.extract", "kbctl.ingest.store"} <= names, names
    assert services == {"kbctl-test"}
    assert {s.trace_id.hex() for s in spans} == {trace_id}
    root = next(s for s in spans if s.name == "kbctl.ingest")
    assert root.parent_span_id.hex() == span_id
