"""A wrong port or protocol is said as what answered there and what to change (issue 34, point 7).

``replay`` used to say "cannot connect" to a gRPC port given as OTLP/HTTP and to a port of another service, to paste
gRPC's parser error ("Failed parsing HTTP/2 …") for an HTTP port given as gRPC, and to paste a web server's whole
HTML error page into its one line. Real servers on real sockets: the project's OTLP receiver (gRPC and HTTP), the
standard library's HTTP server (whose error answers are HTML pages) and a socket that greets as an SSH server does.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from copilot_otel.cli import main
from copilot_otel.common.errors import EndpointError
from tests.conftest import CLI_GENERATED
from tests.otlp_receiver import OtlpReceiver

SESSION = CLI_GENERATED / "multi-tool"


class _Quiet(BaseHTTPRequestHandler):
    """The standard library's own handler: a POST gets its HTML "Error response" page (501)."""

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def web_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def ssh_like() -> Iterator[str]:
    """A port of another service: it greets every connection with a banner and closes it."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError):  # a client that hung up first is no failure of the test
                conn.sendall(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        listener.close()


def _replay(capsys: pytest.CaptureFixture[str], endpoint: str, protocol: str) -> tuple[int, str]:
    code = main(
        ["replay", str(SESSION), "--endpoint", endpoint, "--protocol", protocol, "--max-retry-time", "30",
         "--no-progress"]
    )  # fmt: skip
    return code, capsys.readouterr().err


def test_a_web_servers_html_page_is_named_not_pasted(
    capsys: pytest.CaptureFixture[str], web_server: str
) -> None:
    code, err = _replay(capsys, web_server, "http/protobuf")
    assert code == EndpointError.exit_code
    assert "an HTML page titled 'Error response': a web server, not an OTLP receiver?" in err
    assert "<" not in err, err  # on main: "HTTP 501 <!DOCTYPE HTML> <html lang=…"


def test_grpc_to_an_http_port_says_the_port_speaks_http(
    capsys: pytest.CaptureFixture[str], web_server: str
) -> None:
    code, err = _replay(capsys, web_server, "grpc")
    # on main: exit 5 after retrying, with gRPC's "Failed parsing HTTP/2 (Expected SETTINGS frame …)"
    assert code == EndpointError.exit_code
    assert (
        f"no OTLP/gRPC at {web_server}: that port speaks plain HTTP, not gRPC: use --protocol http/protobuf"
        in err
    )
    assert "Failed parsing" not in err and "retrying" not in err, err


def test_http_to_a_grpc_port_says_the_port_speaks_grpc(
    capsys: pytest.CaptureFixture[str], receiver: OtlpReceiver
) -> None:
    code, err = _replay(capsys, receiver.grpc_endpoint, "http/protobuf")
    assert code == EndpointError.exit_code  # on main: "cannot connect to …", retried for the whole retry time
    assert "that port speaks gRPC (HTTP/2 only): use --protocol grpc" in err, err
    assert "cannot connect" not in err
    assert receiver.spans() == []


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_port_of_another_service_is_said_with_what_it_answered(
    capsys: pytest.CaptureFixture[str], ssh_like: str, protocol: str
) -> None:
    code, err = _replay(capsys, ssh_like, protocol)
    assert code == EndpointError.exit_code
    assert "that port speaks neither HTTP nor gRPC (it answered 'SSH-2.0-OpenSSH_9.2p1 Debian-2')" in err, err


def test_a_collector_that_is_down_is_still_retried_not_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # nothing listens: no answer to read, so it is an outage (retried), not a wrong port
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    code = main(
        ["replay", str(SESSION), "--endpoint", f"http://127.0.0.1:{port}", "--protocol", "http/protobuf",
         "--max-retry-time", "1", "--no-progress"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code != EndpointError.exit_code and "cannot connect to" in err, err
