"""A tiny real HTTP server on 127.0.0.1 that answers every POST with one fixed 200 (not an OTLP receiver)."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def answering(
    body: bytes = b"", content_type: str | None = None
) -> Iterator[tuple[str, dict[str, dict[str, str]]]]:
    """Serve ``200`` with ``body`` (and ``content_type``, if given) to every POST; yields the server's URL and each
    path's last request headers (lower-case names)."""
    seen: dict[str, dict[str, str]] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen[self.path] = {key.lower(): value for key, value in self.headers.items()}
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            if content_type is not None:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", seen
    finally:
        server.shutdown()
        server.server_close()
