"""An OTLP/HTTP trace collector on loopback, for the tests where a real ``kbctl`` process exports
its spans (``OTEL_EXPORTER_OTLP_ENDPOINT``).

Each collector keeps its own list of what it received: a request of another test's collector (an
exporter of a process still flushing, a port the system gave out again) never lands in this test's
list. ``describe()`` lists every span received, with the process that sent it, for an assertion's
message. Needs the extra ``kbctl[otel]`` (the OTLP protobuf messages).
"""

from __future__ import annotations

import gzip
import http.server
import threading
from typing import Any


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        self.server.received.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


class Collector(http.server.HTTPServer):
    """A collector serving on a thread of this process from construction; ``with Collector() as c:``
    stops it and frees its port at the end."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.received: list[bytes] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()
        self.server_close()

    @property
    def endpoint(self) -> str:
        """The value of ``OTEL_EXPORTER_OTLP_ENDPOINT`` for a process to export here."""
        return f"http://127.0.0.1:{self.server_port}"

    def resource_spans(self) -> list[tuple[dict, Any]]:
        """(the sender's resource attributes, a span) for every span received, in order."""
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        return [
            (attrs(rs.resource), s)
            for body in list(self.received)
            for rs in ExportTraceServiceRequest.FromString(body).resource_spans
            for ss in rs.scope_spans
            for s in ss.spans
        ]

    def spans(self) -> list:
        """Every span received, in order."""
        return [s for _, s in self.resource_spans()]

    def clear(self) -> None:
        self.received.clear()

    def describe(self) -> str:
        """Every span received, one a line: name, trace id, parent span id, span id, and the
        ``service.name`` and ``process.pid`` of the process that sent it."""
        lines = [f"{len(self.received)} requests received:"]
        for resource, s in self.resource_spans():
            lines.append(
                f"  {s.name} trace={s.trace_id.hex()} parent={s.parent_span_id.hex() or '-'} span={s.span_id.hex()}"
                f" [service.name={resource.get('service.name')} process.pid={resource.get('process.pid', '?')}]"
            )
        return "\n".join(lines)


def attrs(item: Any) -> dict:
    """The attributes of a received span (or resource) as a dict."""
    return {a.key: getattr(a.value, a.value.WhichOneof("value")) for a in item.attributes}
