"""Transport details the receiver-based tests do not see: request headers."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any

from copilot_otel.export import Signal, build_transport


@contextlib.contextmanager
def header_server() -> Iterator[tuple[str, dict[str, dict[str, str]]]]:
    """An HTTP server answering 200 to every POST; yields its URL and each path's last request headers."""
    seen: dict[str, dict[str, str]] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen[self.path] = {key.lower(): value for key, value in self.headers.items()}
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_otlp_headers_from_the_environment_reach_the_collector() -> None:
    with header_server() as (url, seen):
        env = {
            "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20s3cret,x-team=a",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=traces",
        }
        transport = build_transport(url, "http/protobuf", None, env)
        assert transport.send(Signal.TRACES, b"", 5).ok
        assert transport.send(Signal.LOGS, b"", 5).ok
    logs, traces = seen["/v1/logs"], seen["/v1/traces"]
    assert logs["authorization"] == "Bearer s3cret"  # URL-decoded
    assert logs["x-team"] == "a" and logs["content-type"] == "application/x-protobuf"
    # the per-signal variable wins over the general one, whole (the OTLP exporter specification; the SDK does so)
    assert traces["x-team"] == "traces" and "authorization" not in traces
