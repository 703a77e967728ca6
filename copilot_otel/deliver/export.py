"""Export stage: span and log records → OTLP requests → a collector (gRPC, HTTP) or the embedded file.

We do not put the durable path through the SDK's ``BatchSpanProcessor``: it drops on overflow, ignores export
failures and cannot tell a permanent rejection from an outage (see reliability.md). Instead records are encoded
straight into OTLP protobuf bytes (:mod:`~copilot_otel.deliver.wire`) — skipping the per-span ``ReadableSpan`` and
``Resource`` hashing the SDK encoder pays for — and sent by a thin transport that returns what happened:

* accepted → the caller may checkpoint;
* retryable (refused, timeout, 429/502/503/504, UNAVAILABLE…) → :class:`Sender` retries with backoff, honouring
  ``Retry-After`` and gRPC ``RetryInfo``;
* about the endpoint, not the data (401, 403, 407, a 404 for traces, gRPC UNAUTHENTICATED, PERMISSION_DENIED,
  UNIMPLEMENTED, a TLS handshake that fails: certificate not trusted, client certificate wanted, or a 400 /
  INVALID_ARGUMENT that a request with no records in it gets too: a collector that rejects every request) → nothing
  is dead-lettered: the daemon holds the data (the log files are the buffer) and retries with backoff, saying once
  what to fix; a bounded caller (``replay``, ``doctor``) fails at once;
* too large (HTTP 413, gRPC RESOURCE_EXHAUSTED "larger than max") → the request is split and the byte cap lowered
  (every request is kept under ``COPILOT_OTEL_MAX_REQUEST_BYTES``, 4 MiB by default, as collectors are); a record
  too large alone has its captured content cut, marked, said once and counted;
* permanent (400, INVALID_ARGUMENT) → the batch is bisected down to the poison records, which are dead-lettered,
  and the rest is delivered; a dead letter that cannot be written holds the delivery (the daemon retries the
  write, ``replay`` fails): a checkpoint never passes a record neither delivered nor kept;
* a ``partial_success`` (accepted, some records rejected, which ones unsaid) → nothing is re-sent (OTLP: the client
  must not retry it); the rejected count and the collector's message are counted and logged; when every record
  of the request was rejected, each is known and dead-lettered;
* a record the encoder cannot write (a timestamp past 2554, an out-of-range number) → that record alone is
  dropped (counted, logged, written to the dead-letter file); the rest of its batch is sent.

Every signal is sent with its own :class:`~copilot_otel.settings.config.OtlpOptions` from the settings table: headers,
compression, TLS (:mod:`~copilot_otel.deliver.tls`: CA file, OS trust store or certifi, client certificate) and a deadline,
``OTEL_EXPORTER_OTLP_{TRACES,LOGS,METRICS}_TIMEOUT`` or ``OTEL_EXPORTER_OTLP_TIMEOUT`` (milliseconds, as the
specification says), 10 s by default.
"""

from __future__ import annotations

import base64
import enum
import gzip
import logging
import operator
import random
import re
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from .._version import __version__
from ..common import display
from ..common.ratelimit import RateLimitedLog
from ..model.records import NUMBER_MAX, LogRecord, SpanRecord
from ..settings.config import DEFAULT_MAX_REQUEST_BYTES, OtlpOptions
from . import probe, wire
from .batcher import Packer, Part
from .keep import Keeper
from .outcome import BACKOFF_MAX_S, BACKOFF_START_S, Delivery, DeliveryStats, StopFlag
from .sink import KEEP, MAX_BYTES, RotatingFile

logger = logging.getLogger(__name__)

SCOPE_NAME = "copilot_otel"
# How many records and bytes a request holds: the one batcher (batcher.BATCH_RECORDS, batcher.Packer) says.
# A repeated warning (retries, dead letters, drops, a misconfigured endpoint) is logged at most this often; the
# lines in between are counted and the count is given with the next one.
_LOG_EVERY_S = 30.0


class Signal(str, enum.Enum):
    """The OTLP signals and their HTTP paths."""

    TRACES = "traces"
    LOGS = "logs"
    METRICS = "metrics"

    @property
    def path(self) -> str:
        return f"/v1/{self.value}"


# --------------------------------------------------------------------------------------------- encoding
SCOPE = wire.scope(SCOPE_NAME, __version__)


def make_resource(attributes: Mapping[str, Any]) -> bytes:
    """The one shared OTLP ``Resource`` of everything this process exports, encoded once."""
    return wire.resource(attributes)


def encode_spans(records: Sequence[SpanRecord], resource: bytes) -> bytes:
    """Serialized ``ExportTraceServiceRequest`` for a batch of spans."""
    return wire.export_trace_request(records, resource, SCOPE)


def encode_logs(records: Sequence[LogRecord], resource: bytes) -> bytes:
    """Serialized ``ExportLogsServiceRequest`` for a batch of log events."""
    return wire.export_logs_request(records, resource, SCOPE)


_REQUEST_TYPES: dict[Signal, Any] = {
    Signal.TRACES: trace_service_pb2.ExportTraceServiceRequest,
    Signal.LOGS: logs_service_pb2.ExportLogsServiceRequest,
    Signal.METRICS: metrics_service_pb2.ExportMetricsServiceRequest,
}
_ID_KEYS = {"traceId", "spanId", "parentSpanId"}


def _hex_ids(node: Any) -> Any:
    """OTLP/JSON writes ids as hex, protobuf's JSON mapping as base64: convert in place."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                node[key] = base64.b64decode(value).hex()
            else:
                _hex_ids(value)
    elif isinstance(node, list):
        for item in node:
            _hex_ids(item)
    return node


def to_otlp_json(signal: Signal, body: bytes) -> bytes:
    """A serialized request → one line of OTLP/JSON (the collector's file-exporter format)."""
    message = _REQUEST_TYPES[signal].FromString(body)
    as_dict = MessageToDict(message, use_integers_for_enums=True)
    return orjson.dumps(_hex_ids(as_dict))


# --------------------------------------------------------------------------------------------- transports
@dataclass(frozen=True, slots=True)
class SendResult:
    """What one request achieved.

    Attributes:
        ok: The collector accepted the request.
        retryable: A failure worth retrying (outage, throttling); False = permanent rejection.
        retry_after: Seconds the collector asked us to wait, if it said.
        rejected: Items the collector reported as rejected in a partial success.
        message: A short human-readable reason.
        unsupported: The endpoint does not take this signal at all (e.g. 405 for logs): nothing to retry or
            dead-letter record by record.
        endpoint: The answer is about the endpoint, not the data (bad credentials, wrong path): the records are
            fine and must be held until the endpoint accepts them; ``message`` says what to fix.
        too_large: The request was larger than the collector takes (HTTP 413, gRPC ``RESOURCE_EXHAUSTED`` "larger
            than max"): to be split, not retried as it is.
        limit: The collector's limit in bytes, when its answer says it (gRPC does).
    """

    ok: bool
    retryable: bool = False
    retry_after: float | None = None
    rejected: int = 0
    message: str = ""
    unsupported: bool = False
    endpoint: bool = False
    too_large: bool = False
    limit: int | None = None


class Transport(Protocol):
    """Sends one serialized OTLP request; never raises."""

    description: str

    def send(self, signal: Signal, body: bytes, timeout: float) -> SendResult: ...

    def close(self) -> None: ...


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


_RETRYABLE_HTTP = {408, 429, 500, 502, 503, 504}
# Answers meaning "no such signal here" (Phoenix answers 405 to logs and metrics): not the records' fault.
_UNSUPPORTED_HTTP = {404, 405, 415, 501}
# How long a failed connection's port is asked what it speaks (a wrong port or protocol answers at once).
_PROBE_S = 2.0
# Answers about who we are, not what we sent: the same records would be accepted with the right credentials.
_AUTH_HTTP = {401: "Unauthorized", 403: "Forbidden", 407: "Proxy Authentication Required"}


def _doubled_path(url: str) -> str | None:
    """The base URL when ``url``'s path has an OTLP signal path twice (``OTEL_EXPORTER_OTLP_ENDPOINT`` set to
    ``…/v1/traces``, to which ``/v1/traces`` was appended again), else ``None``."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    for signal in Signal:
        head = path[: -len(signal.path)]
        if path.endswith(signal.path) and any(head.endswith(other.path) for other in Signal):
            return f"{parts.scheme}://{parts.netloc}{head[: head.rindex('/v1/')]}"
    return None


def _http_endpoint_error(status: int, reason: str, url: str, signal: Signal, headers_set: bool) -> str | None:
    """What to fix when an HTTP answer is about the endpoint rather than the data, else ``None``."""
    if status in (401, 403):
        state = (
            "the credentials in OTEL_EXPORTER_OTLP_HEADERS were refused (an expired token?)"
            if headers_set
            else "OTEL_EXPORTER_OTLP_HEADERS is not set (e.g. 'authorization=Bearer …')"
        )
        return f"HTTP {status} {_AUTH_HTTP[status]} from {url}: check OTEL_EXPORTER_OTLP_HEADERS; {state}"
    if status == 407:
        return (
            f"HTTP 407 {_AUTH_HTTP[407]} from {url}: a proxy between here and the collector wants credentials; "
            "check HTTPS_PROXY/HTTP_PROXY (http://user:password@proxy:port) or add the collector to NO_PROXY"
        )
    base = _doubled_path(url)
    if status == 404 and base is not None:
        head = urlsplit(url).path.rstrip("/")[: -len(signal.path)]
        suffix = head[head.rindex("/v1/") :]
        return (
            f"HTTP 404 from {url}: the endpoint already ends in {suffix}; wrong path or port: give the base URL "
            f"(OTEL_EXPORTER_OTLP_ENDPOINT={base})"
        )
    if status in _UNSUPPORTED_HTTP and signal is Signal.TRACES:
        return (
            f"{reason} from {url}: no OTLP traces receiver there; wrong path or port: give the base URL of the "
            "collector's OTLP/HTTP port (http://host:4318, without /v1/traces), or the full URL in "
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        )
    return None


class HttpTransport:
    """OTLP/HTTP protobuf over pooled ``requests`` sessions (one per TLS configuration)."""

    def __init__(self, endpoints: Mapping[Signal, str], options: Mapping[Signal, OtlpOptions]) -> None:
        import requests

        from . import tls  # with ssl: only when something is sent over the network (start-up time)

        self._requests = requests
        self._endpoints = dict(endpoints)
        self._options = dict(options)
        self._headers: dict[Signal, dict[str, str]] = {}
        sessions: dict[tuple[Any, ...], Any] = {}
        self._sessions: dict[Signal, Any] = {}
        for signal in Signal:
            opts = options[signal]
            headers = {
                "Content-Type": "application/x-protobuf",
                "User-Agent": f"copilot-otel/{__version__}",
                **opts.headers.as_dict(),
            }
            if opts.compression == "gzip":
                headers["Content-Encoding"] = "gzip"
            self._headers[signal] = headers
            key = (*opts.tls_files, opts.trust)
            if key not in sessions:
                sessions[key] = requests.Session()
                if any(url.lower().startswith("https:") for url in endpoints.values()):
                    sessions[key].mount("https://", tls.adapter(opts))
            self._sessions[signal] = sessions[key]
        # What messages show: the URLs without credentials (display.url); the real ones are only posted to.
        self._shown = {signal: display.url(url) for signal, url in self._endpoints.items()}
        self.description = f"OTLP/HTTP {self._shown[Signal.TRACES]}"

    def send(self, signal: Signal, body: bytes, timeout: float) -> SendResult:
        gzipped = self._options[signal].compression == "gzip"
        data = gzip.compress(body, 6) if gzipped else body
        try:
            resp = self._sessions[signal].post(
                self._endpoints[signal], data=data, headers=self._headers[signal], timeout=timeout
            )
        except self._requests.exceptions.SSLError as exc:  # before ConnectionError, its base class
            from . import tls  # start-up time, as in __init__

            message = tls.failure(self._shown[signal], display.scrub(str(exc)), self._options[signal])
            return SendResult(ok=False, endpoint=True, message=message)
        except self._requests.ConnectionError:
            # something that answers in another protocol is a wrong port or protocol, held and said, not retried
            mismatch = probe.protocol_mismatch(
                self._endpoints[signal], "http/protobuf", min(timeout, _PROBE_S)
            )
            if mismatch is not None:
                return SendResult(
                    ok=False, endpoint=True, message=f"no OTLP/HTTP at {self._shown[signal]}: {mismatch}"
                )
            return SendResult(ok=False, retryable=True, message=f"cannot connect to {self._shown[signal]}")
        except self._requests.Timeout:
            return SendResult(
                ok=False,
                retryable=True,
                message=f"no answer from {self._shown[signal]} within {timeout:.0f}s",
            )
        except self._requests.RequestException as exc:
            return SendResult(ok=False, retryable=True, message=f"{type(exc).__name__}: {_short(exc)}")
        if 200 <= resp.status_code < 300:
            not_otlp = _not_an_export_response(signal, resp.headers.get("Content-Type"), resp.content)
            if not_otlp is not None:
                return SendResult(
                    ok=False, endpoint=True, message=_not_otlp_fix(not_otlp, self._shown[signal])
                )
            rejected, message = _partial_success(signal, resp.content)
            if rejected:
                return SendResult(ok=False, retryable=False, rejected=rejected, message=message)
            return SendResult(ok=True)
        said = _error_text(resp.headers.get("Content-Type"), resp.content, resp.text) or resp.reason or ""
        reason = f"HTTP {resp.status_code} {_short(said)}".strip()
        fix = _http_endpoint_error(
            resp.status_code, reason, self._shown[signal], signal, bool(self._options[signal].headers)
        )
        if fix is not None:
            return SendResult(ok=False, endpoint=True, message=fix)
        if resp.status_code in _UNSUPPORTED_HTTP and signal is not Signal.TRACES:
            return SendResult(
                ok=False,
                unsupported=True,
                message=(
                    f"{reason} from {self._shown[signal]}: this endpoint does not accept {signal.value} "
                    f"(a traces-only backend?); set COPILOT_OTEL_{signal.value.upper()}=false"
                ),
            )
        if resp.status_code == 413:  # Content Too Large: split, never re-sent as it was
            return SendResult(ok=False, too_large=True, message=reason)
        if resp.status_code in _RETRYABLE_HTTP:
            return SendResult(
                ok=False,
                retryable=True,
                retry_after=_parse_retry_after(resp.headers.get("Retry-After")),
                message=reason,
            )
        return SendResult(ok=False, retryable=False, message=reason)

    def close(self) -> None:
        for session in set(self._sessions.values()):
            session.close()


def _error_text(content_type: str | None, content: bytes, text: str) -> str:
    """What an error answer says: an OTLP server's protobuf body is a ``google.rpc.Status``, whose ``message`` is
    the text (shown raw, its bytes read as text, it began with control characters); any other body as it is."""
    if (content_type or "").split(";")[0].strip().lower() in _PROTOBUF_TYPES:
        from google.protobuf.message import DecodeError
        from google.rpc import status_pb2

        try:
            return str(status_pb2.Status.FromString(content).message)
        except DecodeError:
            pass
    page = probe.html_page(content_type, content)
    return text if page is None else page


def _short(value: object, limit: int = 200) -> str:
    """One line of at most ``limit`` characters, URL credentials masked (a library's message may quote them)."""
    text = display.scrub(str(value).replace("\n", " "))
    return text if len(text) <= limit else text[:limit] + "…"


_RESPONSE_TYPES: dict[Signal, Any] = {
    Signal.TRACES: trace_service_pb2.ExportTraceServiceResponse,
    Signal.LOGS: logs_service_pb2.ExportLogsServiceResponse,
    Signal.METRICS: metrics_service_pb2.ExportMetricsServiceResponse,
}
_PROTOBUF_TYPES = frozenset({"application/x-protobuf", "application/protobuf"})


def _not_an_export_response(signal: Signal, content_type: str | None, content: bytes) -> str | None:
    """Why a 2xx answer is not an OTLP export response, else ``None``.

    A web UI, a catch-all proxy or a login page answers 200 too (``hello``, text/html): counting that as accepted
    would advance checkpoints for data no collector got. The OTLP/HTTP specification has the server answer with
    the request's content type (we send protobuf; a JSON answer is tolerated) and an ``Export*ServiceResponse``
    body, which may be empty. An empty answer without a content type is taken as an empty response.
    """
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind in _PROTOBUF_TYPES:
        try:
            _RESPONSE_TYPES[signal].FromString(content)
        except (
            Exception
        ):  # DecodeError, or another error by protobuf build (upb, cpp, python): all mean 'not one'
            return f"a {kind} body that is not an {_RESPONSE_TYPES[signal].__name__}"
        return None
    if kind == "application/json":
        from google.protobuf.json_format import Parse, ParseError

        try:
            Parse(content or b"{}", _RESPONSE_TYPES[signal]())
        except (ParseError, ValueError, UnicodeDecodeError):
            return f"an application/json body that is not an {_RESPONSE_TYPES[signal].__name__}"
        return None
    if not kind and not content:
        return None
    preview = _short(content.decode("utf-8", "replace"), 40)
    return f"{kind or 'no content type'} ({len(content):,} bytes: {preview!r})"


def _not_otlp_fix(why: str, url: str) -> str:
    return (
        f"HTTP 200 from {url} is not an OTLP export response ({why}): nothing was taken as delivered; is it a "
        "collector's OTLP/HTTP port (http://host:4318), not a web UI or a proxy's catch-all page?"
    )


def _partial_success(signal: Signal, content: bytes) -> tuple[int, str]:
    if not content:
        return 0, ""
    try:
        response = _RESPONSE_TYPES[signal].FromString(content)
    except Exception:  # a JSON body (checked by _not_an_export_response) carries no partial success we read
        return 0, ""
    partial = response.partial_success
    rejected = getattr(
        partial,
        {"traces": "rejected_spans", "logs": "rejected_log_records", "metrics": "rejected_data_points"}[
            signal.value
        ],
        0,
    )
    return int(rejected), partial.error_message


class GrpcTransport:
    """OTLP/gRPC with the generated service stubs (no SDK-internal retries: we own retrying); one channel per TLS
    configuration, headers and compression per signal."""

    def __init__(self, endpoint: str, options: Mapping[Signal, OtlpOptions]) -> None:
        import grpc
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

        from . import tls  # with ssl: only when something is sent over the network (start-up time)

        self._grpc = grpc
        target = endpoint.split("://", 1)[-1].rstrip("/")
        channel_options = [("grpc.max_send_message_length", 64 * 1024 * 1024)]
        self._options = dict(options)
        channels: dict[tuple[Any, ...], Any] = {}
        channel_of: dict[Signal, Any] = {}
        for signal in Signal:
            opts = options[signal]
            insecure = endpoint.startswith("http://") or opts.insecure
            key = (insecure, *opts.tls_files, opts.trust)
            if key not in channels:
                if insecure:
                    channels[key] = grpc.insecure_channel(target, options=channel_options)
                else:
                    channels[key] = grpc.secure_channel(
                        target, tls.grpc_credentials(opts), options=channel_options
                    )
            channel_of[signal] = channels[key]
        self._channels = list(channels.values())
        self._metadata = {
            signal: tuple((k.lower(), v) for k, v in options[signal].headers.items) or None
            for signal in Signal
        }
        self._compression = {
            signal: grpc.Compression.Gzip if options[signal].compression == "gzip" else None
            for signal in Signal
        }
        self._endpoint = display.url(endpoint)  # what messages show; the channels have the real target
        self._target = endpoint
        self._calls: dict[Signal, tuple[Any, Any]] = {
            Signal.TRACES: (
                trace_service_pb2_grpc.TraceServiceStub(channel_of[Signal.TRACES]).Export,  # type: ignore[no-untyped-call]
                trace_service_pb2.ExportTraceServiceRequest,
            ),
            Signal.LOGS: (
                logs_service_pb2_grpc.LogsServiceStub(channel_of[Signal.LOGS]).Export,  # type: ignore[no-untyped-call]
                logs_service_pb2.ExportLogsServiceRequest,
            ),
            Signal.METRICS: (
                metrics_service_pb2_grpc.MetricsServiceStub(channel_of[Signal.METRICS]).Export,  # type: ignore[no-untyped-call]
                metrics_service_pb2.ExportMetricsServiceRequest,
            ),
        }
        self.description = f"OTLP/gRPC {self._endpoint}"

    _RETRYABLE = frozenset(
        {
            "CANCELLED",
            "DEADLINE_EXCEEDED",
            "RESOURCE_EXHAUSTED",
            "ABORTED",
            "OUT_OF_RANGE",
            "UNAVAILABLE",
            "DATA_LOSS",
            "UNKNOWN",
            "INTERNAL",
        }
    )

    def send(self, signal: Signal, body: bytes, timeout: float) -> SendResult:
        call, request_type = self._calls[signal]
        try:
            response = call(
                request_type.FromString(body),
                timeout=timeout,
                metadata=self._metadata[signal],
                compression=self._compression[signal],
            )
        except self._grpc.RpcError as exc:
            code = exc.code().name if hasattr(exc, "code") and exc.code() else "UNKNOWN"
            details = display.scrub(exc.details() if hasattr(exc, "details") else str(exc))
            from . import tls  # start-up time, as in __init__

            if tls.is_handshake_failure(details):
                return SendResult(
                    ok=False,
                    endpoint=True,
                    message=tls.failure(self._endpoint, details, self._options[signal]),
                )
            fix = self._endpoint_error(code, _short(details), signal)
            if fix is None and code == "UNAVAILABLE" and "Failed parsing HTTP/2" in details:
                # an HTTP/1 server (or something else) answered: a wrong port or protocol, never a passing outage
                said = probe.protocol_mismatch(self._target, "grpc", min(timeout, _PROBE_S))
                fix = f"no OTLP/gRPC at {self._endpoint}: " + (
                    said
                    or "that port does not speak gRPC (HTTP/2): is it the collector's gRPC port (usually 4317)?"
                )
            if fix is not None:
                return SendResult(ok=False, endpoint=True, message=fix)
            if code == "UNIMPLEMENTED":
                return SendResult(
                    ok=False,
                    unsupported=True,
                    message=(
                        f"gRPC UNIMPLEMENTED from {self._endpoint}: this endpoint does not accept {signal.value} "
                        f"(a traces-only backend?); set COPILOT_OTEL_{signal.value.upper()}=false"
                    ),
                )
            size = _TOO_LARGE.search(details) if code == "RESOURCE_EXHAUSTED" else None
            if size is not None:  # the message size limit, not throttling: split, never retried as it was
                return SendResult(
                    ok=False, too_large=True, limit=int(size[2]), message=f"gRPC {code} {_short(details)}"
                )
            return SendResult(
                ok=False,
                retryable=code in self._RETRYABLE,
                retry_after=_grpc_retry_delay(exc),
                message=f"gRPC {code} {_short(details)}",
            )
        rejected, message = _partial_success(signal, response.SerializeToString())
        if rejected:
            return SendResult(ok=False, retryable=False, rejected=rejected, message=message)
        return SendResult(ok=True)

    def _endpoint_error(self, code: str, details: str, signal: Signal) -> str | None:
        """What to fix when a status is about the endpoint rather than the data, else ``None``."""
        where = f"gRPC {code} {details} from {self._endpoint}".replace("  ", " ")
        if code in ("UNAUTHENTICATED", "PERMISSION_DENIED"):
            state = (
                "the credentials in OTEL_EXPORTER_OTLP_HEADERS were refused (an expired token?)"
                if self._metadata[signal]
                else "OTEL_EXPORTER_OTLP_HEADERS is not set (e.g. 'authorization=Bearer …')"
            )
            return f"{where}: check OTEL_EXPORTER_OTLP_HEADERS; {state}"
        if code == "UNIMPLEMENTED" and signal is Signal.TRACES:
            return (
                f"{where}: no OTLP trace service there; is it the collector's gRPC port (usually 4317)? "
                "An OTLP/HTTP port (4318) needs OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"
            )
        return None

    def close(self) -> None:
        for channel in self._channels:
            channel.close()


# gRPC's own words for a message over the limit (either side's): "Received message larger than max (X vs. Y)".
_TOO_LARGE = re.compile(r"larger than max \((\d+) vs\. (\d+)\)")


def _grpc_retry_delay(exc: Any) -> float | None:
    """The delay of a ``google.rpc.RetryInfo`` in the error's trailing metadata, if any."""
    try:
        from google.rpc import error_details_pb2, status_pb2
    except ImportError:  # googleapis-common-protos is a dependency of the gRPC exporter, but be safe
        return None
    try:
        for key, value in exc.trailing_metadata() or ():
            if key == "grpc-status-details-bin":
                status = status_pb2.Status.FromString(value)
                for detail in status.details:
                    if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                        info = error_details_pb2.RetryInfo()
                        detail.Unpack(info)
                        return float(info.retry_delay.seconds + info.retry_delay.nanos / 1e9)
    except Exception:  # malformed details: fall back to our own backoff
        return None
    return None


class FileTransport:
    """The embedded default: OTLP/JSON lines appended to a local file (the collector file-exporter format),
    rotated by size (:mod:`copilot_otel.deliver.sink`)."""

    def __init__(self, path: Path, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
        self.path = path
        self.description = f"OTLP/JSON file {path}"
        self._file = RotatingFile(path, max_bytes, keep)

    def send(self, signal: Signal, body: bytes, timeout: float) -> SendResult:
        line = to_otlp_json(signal, body) + b"\n"
        try:
            self._file.append(line)
        except OSError as exc:
            return SendResult(ok=False, retryable=True, message=f"cannot write {self.path}: {exc.strerror}")
        return SendResult(ok=True)

    def close(self) -> None:
        pass


def build_transport(
    endpoint: str | Mapping[str, str] | None,
    protocol: str,
    output_file: Path | None,
    options: Mapping[str, OtlpOptions],
) -> Transport:
    """The transport the standard ``OTEL_EXPORTER_OTLP_*`` settings describe.

    Args:
        endpoint: Each signal's URL by signal name, as the settings table resolves them
            (:meth:`Config.signal_endpoints <copilot_otel.settings.config.Config.signal_endpoints>`), or one base
            endpoint (``http://host:4318``) every signal's path is appended to, or ``None`` for the embedded
            file. gRPC sends every signal to the traces target (one channel).
        protocol: ``grpc`` or ``http/protobuf``.
        output_file: Where the embedded default writes when no endpoint is configured.
        options: Each signal's headers, timeout, compression and TLS files by signal name (:meth:`Config.otlp`).
    """
    if endpoint is None:
        if output_file is None:
            raise ValueError("no endpoint and no output file")
        return FileTransport(output_file)
    per_signal = {signal: options[signal.value] for signal in Signal}
    if protocol == "grpc":
        return GrpcTransport(
            endpoint if isinstance(endpoint, str) else endpoint[Signal.TRACES.value], per_signal
        )
    if isinstance(endpoint, str):
        base = endpoint.rstrip("/")
        return HttpTransport({signal: f"{base}{signal.path}" for signal in Signal}, per_signal)
    return HttpTransport({signal: endpoint[signal.value] for signal in Signal}, per_signal)


# --------------------------------------------------------------------------------------------- sender
# What the endpoint line says of a collector that rejects a request with no records as it rejects ours.
REJECTS_EVERY_REQUEST = "the collector rejects every request"
# The daemon keeps retrying a misconfigured endpoint; it said what to fix when it started, then reminds this often.
_ENDPOINT_REMINDER_S = 300.0
# What the wire encoder raises on a value it cannot write (a timestamp beyond 2**64 ns, a bad enum value).
ENCODE_ERRORS = (struct.error, OverflowError, ValueError, TypeError, KeyError)


def measurement_encodable(value: float) -> bool:
    """Whether a measurement's value may be recorded (finite, below ``records.NUMBER_MAX`` in magnitude: replay's
    int64 sums could not encode more); callers count the rest."""
    return abs(value) < NUMBER_MAX


@dataclass(frozen=True, slots=True)
class _Codec:
    """How one signal's records are written: each record alone, then requests of records already written."""

    one: Callable[[Any], bytes]
    request: Callable[[Iterable[bytes], bytes, bytes], bytes]


_CODECS = {
    Signal.TRACES: _Codec(wire.span, wire.trace_request),
    Signal.LOGS: _Codec(wire.log_record, wire.logs_request),
}
_MESSAGE = operator.itemgetter(1)


class Sender:
    """Delivers batches with retries; never raises into the caller's loop.

    Every request is kept under the one batcher's limits (:class:`~copilot_otel.deliver.batcher.Packer`: records
    and bytes); a collector that answers that a request is too large (HTTP 413, gRPC ``RESOURCE_EXHAUSTED`` "larger
    than max") lowers the byte cap for the rest of the run and the request is split.

    Args:
        transport: Where requests go.
        resource: The shared OTLP resource.
        dead_letter: File for permanently rejected records (JSON lines), or ``None`` to only count them.
        stop: Interrupts waits between retries (the daemon's stop event).
        timeouts: Each signal's request timeout in seconds by signal name (:attr:`Config.otlp_timeout`).
        max_request_bytes: The largest request (:attr:`Config.max_request_bytes`).
    """

    def __init__(
        self,
        transport: Transport,
        resource: bytes,
        dead_letter: Path | None,
        stop: StopFlag | None,
        timeouts: Mapping[str, float],
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    ) -> None:
        self.transport = transport
        self.resource = resource
        self.stop = stop or threading.Event()
        self.timeouts = {signal: timeouts[signal.value] for signal in Signal}
        #: A cap on every request's timeout (``doctor`` lowers it); the per-signal timeouts apply below it.
        self.timeout_s = max(self.timeouts.values())
        #: ``time.monotonic()`` after which nothing more is attempted (set by the daemon's shutdown).
        self.give_up_at: float | None = None
        self.stats = DeliveryStats()
        self._log = RateLimitedLog(logger, _LOG_EVERY_S)
        #: The requests' limits, in records and bytes (the byte cap lowered by a collector's "too large").
        self.packer = Packer(max_request_bytes, self._log, self._count_cut)
        #: Where what no collector will take is kept (the dead-letter file), or held.
        self.keeper = Keeper(dead_letter, transport.description, self.stats, self._log, self.stop, self._wait)
        #: Drop a signal the endpoint does not accept at all instead of failing (the daemon and replay set it).
        self.drop_unsupported = False
        #: The signals dropped so (replay names them all in its last line).
        self.unsupported: set[Signal] = set()
        self._transport_raised = False
        # A request with no records (what a collector that refuses everything refuses too) and each signal's
        # request bytes around its records.
        self._empty = {signal: codec.request((), resource, SCOPE) for signal, codec in _CODECS.items()}
        self._framing = {signal: len(body) + wire.FRAMING_SLACK for signal, body in self._empty.items()}

    @property
    def dead_letter(self) -> Path | None:
        """The dead-letter file (``None``: rejected records are only counted, as ``doctor``'s probe has it)."""
        return self.keeper.path

    @dead_letter.setter
    def dead_letter(self, path: Path | None) -> None:
        self.keeper.path = path

    def deliver(
        self,
        spans: Sequence[SpanRecord],
        logs: Sequence[LogRecord] = (),
        max_retry_s: float | None = None,
    ) -> Delivery:
        """Send spans then logs, retrying transient failures for up to ``max_retry_s`` (None = forever).

        With ``max_retry_s=None`` (the daemon) an endpoint that refuses us (credentials, path, a collector that
        rejects every request) is retried like an outage, holding the data; with a bound (``replay``, ``doctor``)
        delivery fails at once: waiting does not fix a token or a URL, and the user should hear it now.
        """
        deadline = None if max_retry_s is None else time.monotonic() + max_retry_s
        total = Delivery(True)
        try:
            for signal, records in ((Signal.TRACES, spans), (Signal.LOGS, logs)):
                if not records:
                    continue
                parts, outcome = self._encode(signal, records, deadline)
                total += outcome
                if not total.delivered:
                    return total
                for batch in self._pack(signal, parts):
                    total += self._deliver_batch(signal, batch, deadline, probe=True)
                    if not total.delivered:
                        return total
            return total
        finally:
            self.packer.done()

    def _encode(
        self, signal: Signal, records: Sequence[Any], deadline: float | None
    ) -> tuple[list[Part], Delivery]:
        """Each record's bytes; a record the encoder cannot write costs only that record, never its batch (other
        sessions' spans included): it is dropped, counted and kept in the dead-letter file."""
        one = _CODECS[signal].one
        try:
            return list(zip(records, map(one, records), strict=True)), Delivery(True)
        except ENCODE_ERRORS:
            pass  # find the record(s) it came from, one by one (rare: only poison values get here)
        parts: list[Part] = []
        outcome = Delivery(True)
        for record in records:
            try:
                parts.append((record, one(record)))
            except ENCODE_ERRORS as exc:
                kind = "struct.error" if isinstance(exc, struct.error) else type(exc).__name__
                reason = f"unencodable: a value is out of range for OTLP ({kind}: {_short(exc)})"
                outcome += self.keeper.unencodable(signal.value, record, reason, deadline)
                if not outcome.delivered:
                    break
        return parts, outcome

    def _pack(self, signal: Signal, parts: Sequence[Part]) -> Iterable[list[Part]]:
        return self.packer.pack(parts, self._framing[signal], _CODECS[signal].one)

    def _count_cut(self) -> None:
        with self.stats.lock:
            self.stats.shrunk += 1

    def _deliver_batch(
        self, signal: Signal, batch: list[Part], deadline: float | None, probe: bool
    ) -> Delivery:
        """Send one request of ``batch``; a rejection splits it (too large), counts it (a partial success) or
        bisects it to the poison records (permanent). ``probe``: a permanent rejection is first checked against
        a request with no records, to tell a collector that rejects everything from records it rejects."""
        codec = _CODECS[signal]
        body = codec.request(map(_MESSAGE, batch), self.resource, SCOPE)
        if len(body) > self.packer.max_request_bytes and len(batch) > 1:  # packed before the cap was lowered
            return self._each(signal, list(self._pack(signal, batch)), deadline)
        result = self._send(signal, body, len(batch), deadline, self._empty[signal] if probe else None)
        if isinstance(result, Delivery):
            return result
        if result.too_large:
            return self._split(signal, batch, deadline, result, len(body))
        if result.rejected:
            return self._partial(signal, batch, deadline, result)
        return self._reject(signal, batch, deadline, result)

    def _split(
        self, signal: Signal, batch: list[Part], deadline: float | None, result: SendResult, size: int
    ) -> Delivery:
        """The collector said the request was too large: lower the cap for the rest of the run and send the
        records again in smaller requests (a record alone has its content cut; what cannot be cut is
        dead-lettered with the collector's answer)."""
        cap = self.packer.lower(size, result.limit, result.message)
        if len(batch) == 1:
            smaller = self.packer.shrink(batch[0], cap - self._framing[signal], _CODECS[signal].one)
            if smaller is batch[0]:  # nothing left to cut: this collector will never take it
                return self._dead_letter(signal, batch[0], result.message, deadline)
            return self._deliver_batch(signal, [smaller], deadline, probe=False)
        pieces = list(self._pack(signal, batch))
        if len(pieces) == 1:  # the cap did not move (a 413 at or below the floor): halves, so that it ends
            mid = len(batch) // 2
            pieces = [batch[:mid], batch[mid:]]
        return self._each(signal, pieces, deadline)

    def _each(self, signal: Signal, pieces: Sequence[list[Part]], deadline: float | None) -> Delivery:
        """Deliver the pieces of a split or bisected request in order, stopping at the first not delivered."""
        total = Delivery(True)
        for piece in pieces:
            total += self._deliver_batch(signal, piece, deadline, probe=False)
            if not total.delivered:
                break
        return total

    def _partial(
        self, signal: Signal, batch: list[Part], deadline: float | None, result: SendResult
    ) -> Delivery:
        """A partial success: the collector took the request and says how many of its records it rejected, not
        which (OTLP: the client must not retry it). Nothing is re-sent; the rejected ones are counted and said. When
        it rejected them all, each is known and dead-lettered, to be re-sent once it accepts them."""
        if result.rejected >= len(batch):
            total = Delivery(True)
            for part in batch:
                total += self._dead_letter(signal, part, result.message, deadline)
                if not total.delivered:
                    break
            return total
        with self.stats.lock:
            self.stats.rejected += result.rejected
            self.stats.rejected_message = result.message
        self._record_success(signal, len(batch) - result.rejected)
        self._log.log(
            logging.WARNING,
            f"partial:{signal.value}",
            "the collector accepted %s of %s %s records and rejected %s (%s); which ones it does not say, so none "
            "is re-sent",
            len(batch) - result.rejected,
            len(batch),
            signal.value,
            result.rejected,
            result.message or "no reason given",
        )
        return Delivery(True, rejected=result.rejected)

    def deliver_body(self, signal: Signal, body: bytes, max_retry_s: float | None = None) -> Delivery:
        """Send one pre-encoded request (replay's metrics) with the same retries; a permanent rejection fails it."""
        deadline = None if max_retry_s is None else time.monotonic() + max_retry_s
        result = self._send(signal, body, 0, deadline)
        return result if isinstance(result, Delivery) else Delivery(False, error=result.message)

    def _attempt(self, signal: Signal, body: bytes, timeout: float) -> SendResult:
        try:
            return self.transport.send(signal, body, timeout)
        except Exception as exc:  # a transport bug must not kill the daemon: treat as not acked
            if not self._transport_raised:  # its traceback once; later ones are the throttled retry line
                self._transport_raised = True
                logger.exception("the exporter raised instead of returning a failure; not acked, will retry")
            return SendResult(ok=False, retryable=True, message=f"{type(exc).__name__}: {exc}")

    def _send(
        self, signal: Signal, body: bytes, count: int, deadline: float | None, probe: bytes | None = None
    ) -> Delivery | SendResult:
        """Send until accepted, a deadline or a stop; returns the final :class:`SendResult` on a rejection of the
        data (for the caller to split, count or bisect), else a :class:`Delivery`.

        ``probe``: a request with no records, sent after a permanent rejection: rejected too, the answer is about
        the endpoint (it refuses everything), held and said like a 401, not about the records.
        """
        backoff = BACKOFF_START_S
        while True:
            timeout = min(self.timeouts[signal], self.timeout_s)
            if self.give_up_at is not None:
                left = self.give_up_at - time.monotonic()
                if left <= 0:
                    return Delivery(False, error="not sent: the shutdown deadline passed")
                timeout = min(timeout, left)
            result = self._attempt(signal, body, timeout)
            if probe is not None and _permanent(result) and _permanent(self._attempt(signal, probe, timeout)):
                result = SendResult(
                    ok=False,
                    endpoint=True,
                    message=(
                        f"{result.message} from {self.transport.description}, to a request with no records in it "
                        f"too: {REJECTS_EVERY_REQUEST}, so it is the endpoint, not the data; check that this is "
                        "the collector's OTLP address and what its log says"
                    ),
                )
            if result.ok:
                self._record_success(signal, count)
                return Delivery(True)
            with self.stats.lock:
                self.stats.last_error = result.message
                if result.retryable or result.endpoint:  # a rejection being bisected is not an outage
                    self.stats.consecutive_failures += 1
                if result.endpoint:
                    self.stats.endpoint_error = result.message
            if result.unsupported:
                if self.drop_unsupported:
                    # The daemon keeps going: traces still flow, this signal is dropped (said once, loudly).
                    if signal not in self.unsupported:
                        self.unsupported.add(signal)
                        if deadline is None:  # the daemon says it here; replay (a deadline) at its end
                            logger.error("%s; dropping %s from now on", result.message, signal.value)
                    return Delivery(True)
                self.stats.failed_batches += 1
                return Delivery(False, error=result.message)
            if result.endpoint and deadline is not None:
                self.stats.failed_batches += 1
                return Delivery(False, error=result.message, endpoint=True)
            if not result.retryable and not result.endpoint:
                return result
            wait = self._wait(result.retry_after, backoff, deadline, result.message)
            if isinstance(wait, Delivery):
                return wait
            backoff = min(backoff * 2, BACKOFF_MAX_S)
            if result.endpoint:
                # One line per fix, not per answer: a collector that rejects everything words each rejection anew.
                said = REJECTS_EVERY_REQUEST if REJECTS_EVERY_REQUEST in result.message else result.message
                self._log.log(
                    logging.ERROR,
                    f"endpoint:{said}",
                    "%s — holding the data (nothing is dropped or checkpointed) and retrying until it is accepted",
                    result.message,
                    interval_s=_ENDPOINT_REMINDER_S,
                )
            else:
                self._log.log(
                    logging.WARNING,
                    "retry",
                    "export failed (%s); retrying in %.1fs (%s so far)",
                    result.message,
                    wait,
                    display.count(self.stats.retries, "retry", "retries"),
                )
            if self.stop.wait(wait):
                return Delivery(False, error=f"stopped while retrying: {result.message}")

    def _wait(
        self, retry_after: float | None, backoff: float, deadline: float | None, message: str
    ) -> float | Delivery:
        """How long to wait before the next attempt (counted as a retry), or the :class:`Delivery` that gives up
        because the deadline or the shutdown's would pass first."""
        wait = retry_after if retry_after is not None else backoff * random.uniform(0.8, 1.2)
        now = time.monotonic()
        if deadline is not None and now + wait > deadline:
            self.stats.failed_batches += 1
            return Delivery(False, error=f"{self.transport.description}: {message}")
        if self.give_up_at is not None and now + wait > self.give_up_at:
            return Delivery(False, error=f"not sent before the shutdown deadline: {message}")
        with self.stats.lock:
            self.stats.retries += 1
        return wait

    def _reject(
        self,
        signal: Signal,
        batch: list[Part],
        deadline: float | None,
        result: SendResult,
    ) -> Delivery:
        """A permanent rejection: bisect to find the poison records, dead-letter them, deliver the rest."""
        if len(batch) == 1:
            return self._dead_letter(signal, batch[0], result.message, deadline)
        mid = len(batch) // 2
        return self._each(signal, (batch[:mid], batch[mid:]), deadline)

    def _dead_letter(self, signal: Signal, part: Part, reason: str, deadline: float | None) -> Delivery:
        record, message = part
        request = _CODECS[signal].request((message,), self.resource, SCOPE)
        return self.keeper.rejected(signal.value, record, reason, request, deadline)

    def _record_success(self, signal: Signal, count: int) -> None:
        with self.stats.lock:
            if signal is Signal.TRACES:
                self.stats.spans_sent += count
            elif signal is Signal.LOGS:
                self.stats.logs_sent += count
            self.stats.last_success_ns = time.time_ns()
            failures, self.stats.consecutive_failures = self.stats.consecutive_failures, 0
            self.stats.endpoint_error = ""
        if failures:
            logger.info("collector accepting again after %d failed attempts", failures)
            self._log.reset("endpoint:")

    def close(self) -> None:
        self.transport.close()


def _permanent(result: SendResult) -> bool:
    """A rejection of the request's data (HTTP 400, gRPC INVALID_ARGUMENT): nothing to wait for or to split."""
    return not (
        result.ok
        or result.retryable
        or result.endpoint
        or result.unsupported
        or result.rejected
        or result.too_large
    )
