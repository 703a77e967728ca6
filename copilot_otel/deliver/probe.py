"""What answers at an endpoint when OTLP does not: the protocol a port speaks, and what a web page says.

A wrong port or protocol is a misconfiguration, not a collector that is down: the libraries say only "cannot
connect" (``requests`` to a gRPC port) or quote their parser (``Failed parsing HTTP/2`` from gRPC to an HTTP port),
and a web server's error page would be pasted whole into the message. These tell the user what answered and what
to change; ``doctor`` and the transports of :mod:`copilot_otel.deliver.export` share them.
"""

from __future__ import annotations

import html
import re
import socket
from urllib.parse import urlsplit

__all__ = ["PLAIN_HTTP_NOT_GRPC", "host_port", "html_page", "protocol_mismatch", "sniff"]

PLAIN_HTTP_NOT_GRPC = (
    "that port speaks plain HTTP, not gRPC: use --protocol http/protobuf (port 4318) or the gRPC port"
)

# Enough of an answer to tell HTTP/1.x, an HTTP/2 frame and a TLS record apart.
_SNIFF_BYTES = 64
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def host_port(endpoint: str) -> tuple[str, int]:
    """The host and port an endpoint URL names (80 or 443 when it names none)."""
    parts = urlsplit(endpoint)
    default = 443 if parts.scheme.lower() == "https" else 80
    return parts.hostname or "localhost", parts.port or default


def sniff(endpoint: str, timeout_s: float) -> str | None:
    """Which protocol a port speaks: ``http/1.1``, ``http/2`` (gRPC), ``tls``, ``https``, or ``None`` if it
    cannot tell (nothing listens, or it said nothing it recognises)."""
    kind, _ = _answer(endpoint, timeout_s)
    return kind


def _answer(endpoint: str, timeout_s: float) -> tuple[str | None, bytes]:
    """What the port speaks (as :func:`sniff`) and the first bytes it answered (empty when it said nothing).

    Sends a plain HTTP/1.1 request and looks at the first bytes of the answer: ``HTTP/1.`` is an HTTP server,
    an HTTP/2 frame (a SETTINGS or GOAWAY header) is a gRPC server, a TLS record is an HTTPS/TLS server.
    """
    if not endpoint:
        return None, b""
    host, port = host_port(endpoint)
    if endpoint.lower().startswith("https://"):
        import ssl  # only for an https endpoint (start-up time: the daemon imports this module)

        try:
            with socket.create_connection((host, port), timeout=timeout_s) as raw:
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                with context.wrap_socket(raw, server_hostname=host) as tls:
                    tls.sendall(
                        b"GET / HTTP/1.1\r\nHost: " + host.encode() + b"\r\nConnection: close\r\n\r\n"
                    )
                    return "https", b""
        except ssl.SSLError:
            pass  # not TLS: see what it speaks in the clear below
        except OSError:
            return None, b""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: " + host.encode() + b"\r\nConnection: close\r\n\r\n")
            head = sock.recv(_SNIFF_BYTES)
    except OSError:
        return None, b""
    if head.startswith(b"HTTP/1."):
        return "http/1.1", head
    if head[:1] in (b"\x15", b"\x16") and head[1:2] == b"\x03":
        return "tls", head
    if len(head) >= 9 and head[3] in (0x04, 0x07):  # HTTP/2 frame header: SETTINGS or GOAWAY
        return "http/2", head
    return None, head


def protocol_mismatch(endpoint: str, protocol: str, timeout_s: float) -> str | None:
    """What to change when the port speaks another protocol than ``protocol`` (``grpc`` or ``http/protobuf``),
    else ``None`` (the port speaks it, or nothing answers: a collector that is down is retried, not refused)."""
    speaks, head = _answer(endpoint, timeout_s)
    https = endpoint.lower().startswith("https://")
    if speaks is None and head:  # an SSH, database or mail server, a port forwarded to the wrong service
        shown = " ".join(head.decode("ascii", "replace").split())[:40]
        return f"that port speaks neither HTTP nor gRPC (it answered {shown!r}): is it the collector's port?"
    if protocol == "grpc":
        if speaks == "http/1.1":
            return PLAIN_HTTP_NOT_GRPC
        return None
    if speaks == "http/2":
        return (
            "that port speaks gRPC (HTTP/2 only): use --protocol grpc, or the OTLP/HTTP port (usually 4318)"
        )
    if speaks == "tls" and not https:
        return "that port expects TLS: use an https:// endpoint"
    if https and speaks == "http/1.1":
        return "that port speaks plain HTTP: use an http:// endpoint"
    return None


def html_page(content_type: str | None, content: bytes) -> str | None:
    """An HTML answer told in a few words (its title), else ``None``: a web server's error page is no message to
    paste into a log line, and it says the endpoint is a web server, not an OTLP receiver."""
    kind = (content_type or "").split(";")[0].strip().lower()
    start = content[:64].lstrip().lower()
    if kind != "text/html" and not start.startswith((b"<!doctype html", b"<html")):
        return None
    found = _TITLE.search(content[:65536])
    title = " ".join(html.unescape(found[1].decode("utf-8", "replace")).split())[:80] if found else ""
    page = f"an HTML page titled {title!r}" if title else "an HTML page"
    return f"({page}: a web server, not an OTLP receiver?)"
