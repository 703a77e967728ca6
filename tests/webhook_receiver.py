"""A real local HTTP server that records the JSON bodies POSTed to it (the webhook's other end in tests)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookReceiver:
    """Serves on 127.0.0.1 in a thread; ``bodies`` are the decoded bodies, ``headers`` their headers.

    ``first``: statuses answered to the first requests, one each, before ``status`` (a webhook that recovers).
    """

    def __init__(self, status: int = 200, first: tuple[int, ...] = ()) -> None:
        self.status = status
        self._first = list(first)
        self.bodies: list[Any] = []
        self.headers: list[dict[str, str]] = []
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._cond:
                    receiver.bodies.append(json.loads(data))
                    receiver.headers.append(dict(self.headers))
                    status = receiver._first.pop(0) if receiver._first else receiver.status
                    receiver._cond.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def wait_for(self, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while len(self.bodies) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"expected {count} webhook calls, got {len(self.bodies)}")
                self._cond.wait(left)
