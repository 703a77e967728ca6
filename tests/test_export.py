"""Transport details the receiver-based tests do not see: request headers."""

from __future__ import annotations

import http.server
import threading
from typing import Any

from copilot_otel.export import Signal, build_transport


def test_otlp_headers_from_the_environment_reach_the_collector() -> None:
    seen: dict[str, str] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.update({key.lower(): value for key, value in self.headers.items()})
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        env = {
            "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20s3cret,x-team=a",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-team=traces",
        }
        transport = build_transport(f"http://127.0.0.1:{server.server_port}", "http/protobuf", None, env)
        assert transport.send(Signal.TRACES, b"", 5).ok
    finally:
        server.shutdown()
        server.server_close()
    assert seen["authorization"] == "Bearer s3cret"  # URL-decoded
    assert seen["x-team"] == "traces"  # the per-signal variable wins
    assert seen["content-type"] == "application/x-protobuf"
