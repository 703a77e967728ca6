"""A real OTLP receiver (gRPC + HTTP) for tests and benchmarks.

Why a real receiver: the export path runs the OpenTelemetry SDK's own OTLP exporters, whose retry,
backoff, ``Retry-After``/``RetryInfo`` and timeout handling is exactly what we need to trust.  Mocking the
exporter would test nothing of that, so the fake sits at the network edge instead: this module speaks genuine
OTLP/gRPC and OTLP/HTTP (protobuf or JSON, optionally gzip/deflate) using the generated
``opentelemetry-proto`` classes, stores what it accepted as flat dicts, and can be scripted to fail in the
ways real collectors fail.

In-process use::

    with OtlpReceiver() as receiver:
        exporter = OTLPSpanExporter(endpoint=receiver.grpc_endpoint, insecure=True)
        receiver.fail_next(1, "unavailable")          # the first export gets UNAVAILABLE, the retry lands
        exporter.export(spans)
        receiver.wait_for(lambda r: len(r.spans()) == len(spans))

Subprocess use (benchmarks, or a collector that must outlive the test process)::

    python tests/otlp_receiver.py --grpc-port 0 --http-port 0 --out received.jsonl [--count-only]

prints ``READY grpc=<port> http=<port>`` once listening and exits cleanly on SIGTERM.  See `main`.
"""

from __future__ import annotations

import argparse
import base64
import collections
import concurrent.futures
import contextlib
import gzip
import json
import os
import signal
import socket
import ssl
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Literal, NoReturn, Protocol, get_args

import grpc
from google.protobuf import any_pb2, json_format
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

__all__ = [
    "FAULT_KINDS",
    "SIGNALS",
    "AcceptSink",
    "Fault",
    "FaultKind",
    "OtlpReceiver",
    "Outcome",
    "RequestRecord",
    "Signal",
    "Transport",
    "count_items",
    "main",
]

Signal = Literal["traces", "metrics", "logs"]
Transport = Literal["grpc", "http"]
FaultKind = Literal[
    "unavailable", "retry_after", "bad_request", "timeout_after_accept", "partial_reject", "refuse"
]
Outcome = Literal[
    "accepted",  # stored and answered with success
    "unavailable",  # scripted HTTP 503 / UNAVAILABLE, not stored
    "retry_after",  # scripted HTTP 429 + Retry-After / RESOURCE_EXHAUSTED + RetryInfo, not stored
    "bad_request",  # scripted HTTP 400 / INVALID_ARGUMENT, not stored
    "timeout_after_accept",  # stored, then answered too late for the client
    "partial_reject",  # answered with success + partial_success rejecting every item, not stored
    "refused",  # scripted HTTP status / gRPC code of the test's choice (401, 404, UNAUTHENTICATED…), not stored
    "rejected",  # a `reject_when` predicate matched a span: HTTP 400 / INVALID_ARGUMENT, not stored
    "malformed",  # HTTP body that is not OTLP (bad encoding, content type or payload), not stored
    "too_large",  # HTTP body over `http_max_body`: 413, not stored (gRPC's limit answers before we see a request)
    "partial_accept",  # `partial_reject_when` matched some spans: the rest stored, success + partial_success
]
SIGNALS: tuple[Signal, ...] = get_args(Signal)
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)

Item = dict[str, Any]
SpanPredicate = Callable[[Item], bool]

_HOST = "127.0.0.1"
# Large enough for the benchmark's biggest batches; gRPC's 4 MiB default would reject them with
# RESOURCE_EXHAUSTED, which would look like one of our scripted faults.
_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Handler threads for gRPC; timeout_after_accept parks one per held request, so leave headroom.
_GRPC_WORKERS = 16
# How long stop() waits for in-flight handlers and the serving threads before giving up on them.
_STOP_TIMEOUT_S = 5.0
# How often serve_forever() checks for shutdown(); bounds how long stop() waits for the HTTP accept loop.
_HTTP_POLL_INTERVAL_S = 0.1

_CONTENT_PROTOBUF = "application/x-protobuf"
_CONTENT_JSON = "application/json"
# OTLP/JSON encodes these ids as hex, protobuf's JSON mapping expects base64 for bytes fields.
_HEX_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"})


@dataclass(frozen=True, slots=True)
class Fault:
    """One scripted response, consumed by exactly one request.

    Attributes:
        kind: What to do with the request (see `FaultKind` and `OtlpReceiver.fail_next`).
        retry_after_s: For ``retry_after``: the delay sent in ``Retry-After`` / ``RetryInfo``.
        delay_s: For ``timeout_after_accept``: how long to hold the answer after storing the data; pick it
            longer than the client's export timeout.
        message: Error text sent to the client (status message / partial success error message).
        http_status: For ``refuse``: the HTTP status to answer with.
        grpc_code: For ``refuse``: the gRPC status code name to answer with (``UNAUTHENTICATED``…).
    """

    kind: FaultKind
    retry_after_s: float = 1.0
    delay_s: float = 3.0
    message: str = ""
    http_status: int = 400
    grpc_code: str = "INVALID_ARGUMENT"


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What happened to one export request, in arrival order (see `OtlpReceiver.request_log`).

    Attributes:
        signal: Which OTLP service was called.
        transport: ``grpc`` or ``http``.
        outcome: How it was answered and whether its data was stored (see `Outcome`).
        item_count: Spans, metric data points or log records in the request (in count-only mode: spans,
            metrics or log records, counted from the wire without decoding).
        received_ns: Wall-clock arrival time.
    """

    signal: Signal
    transport: Transport
    outcome: Outcome
    item_count: int
    received_ns: int

    @property
    def span_count(self) -> int:
        """Number of spans in the request (0 for metrics and logs requests)."""
        return self.item_count if self.signal == "traces" else 0


class AcceptSink(Protocol):
    """Called synchronously for every request whose data was stored, before the client gets its answer.

    Because it runs before the response, a client that saw its export succeed can rely on the sink having
    finished (the subprocess mode uses this to make "export returned" imply "line flushed to the file").
    ``items`` is ``None`` in count-only mode; ``count`` is always set.
    """

    def __call__(self, signal: Signal, items: list[Item] | None, count: int, received_ns: int) -> None: ...


@dataclass(frozen=True, slots=True)
class _SignalSpec:
    """Static facts about one OTLP signal, so the transports handle all three with one code path."""

    signal: Signal
    request_type: type[Message]
    response_type: type[Message]
    http_path: str
    grpc_service: str
    partial_success_field: str


_SPECS: dict[Signal, _SignalSpec] = {
    "traces": _SignalSpec(
        "traces",
        trace_service_pb2.ExportTraceServiceRequest,
        trace_service_pb2.ExportTraceServiceResponse,
        "/v1/traces",
        trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name,
        "rejected_spans",
    ),
    "metrics": _SignalSpec(
        "metrics",
        metrics_service_pb2.ExportMetricsServiceRequest,
        metrics_service_pb2.ExportMetricsServiceResponse,
        "/v1/metrics",
        metrics_service_pb2.DESCRIPTOR.services_by_name["MetricsService"].full_name,
        "rejected_data_points",
    ),
    "logs": _SignalSpec(
        "logs",
        logs_service_pb2.ExportLogsServiceRequest,
        logs_service_pb2.ExportLogsServiceResponse,
        "/v1/logs",
        logs_service_pb2.DESCRIPTOR.services_by_name["LogsService"].full_name,
        "rejected_log_records",
    ),
}
_SPECS_BY_PATH = {spec.http_path: spec for spec in _SPECS.values()}


@dataclass(frozen=True, slots=True)
class _Reply:
    """The transport-neutral answer to one request; each transport renders it its own way."""

    outcome: Outcome
    response: Message | None = None
    grpc_code: grpc.StatusCode | None = None
    http_status: int = 200
    message: str = ""
    retry_after_s: float | None = None
    hold_s: float = 0.0


# ------------------------------------------------------------------------------------------------------------
# Decoding: OTLP protobuf -> flat dicts
# ------------------------------------------------------------------------------------------------------------


def _any_value(value: AnyValue) -> Any:
    """Decode an OTLP ``AnyValue`` to the Python value the SDK was given (``None`` when unset)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, kind)


def _attributes(key_values: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: _any_value(kv.value) for kv in key_values}


def _hex_or_none(raw: bytes) -> str | None:
    return raw.hex() if raw else None


def _decode_traces(request: Message) -> list[Item]:
    assert isinstance(request, trace_service_pb2.ExportTraceServiceRequest)
    items: list[Item] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope.name
            for span in scope_spans.spans:
                items.append(
                    {
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": _hex_or_none(span.parent_span_id),
                        "name": span.name,
                        "kind": span.kind,
                        "start_ns": span.start_time_unix_nano,
                        "end_ns": span.end_time_unix_nano,
                        "attributes": _attributes(span.attributes),
                        "status_code": span.status.code,
                        "status_message": span.status.message,
                        "events": [
                            {
                                "name": event.name,
                                "time_ns": event.time_unix_nano,
                                "attributes": _attributes(event.attributes),
                            }
                            for event in span.events
                        ],
                        "links": [
                            {
                                "trace_id": link.trace_id.hex(),
                                "span_id": link.span_id.hex(),
                                "attributes": _attributes(link.attributes),
                            }
                            for link in span.links
                        ],
                        "resource": resource,
                        "scope": scope,
                    }
                )
    return items


def _metric_point(base: Item, point: Any, **fields: Any) -> Item:
    """One flat metric dict; every key is always present (``None`` when it does not apply to the type)."""
    item: Item = {
        **base,
        "attributes": _attributes(point.attributes),
        "value": None,
        "count": None,
        "sum": None,
        "bucket_counts": None,
        "explicit_bounds": None,
        "min": None,
        "max": None,
        "start_time_ns": point.start_time_unix_nano,
        "time_ns": point.time_unix_nano,
    }
    item.update(fields)
    return item


def _decode_metrics(request: Message) -> list[Item]:
    assert isinstance(request, metrics_service_pb2.ExportMetricsServiceRequest)
    items: list[Item] = []
    for resource_metrics in request.resource_metrics:
        resource = _attributes(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                kind = metric.WhichOneof("data")
                if kind is None:
                    continue
                data = getattr(metric, kind)
                base: Item = {
                    "name": metric.name,
                    "unit": metric.unit,
                    "description": metric.description,
                    "type": kind,  # sum | gauge | histogram | exponential_histogram | summary
                    "is_monotonic": data.is_monotonic if kind == "sum" else None,
                    "temporality": getattr(data, "aggregation_temporality", None),
                    "resource": resource,
                    "scope": scope_metrics.scope.name,
                }
                for point in data.data_points:
                    if kind in ("sum", "gauge"):
                        which = point.WhichOneof("value")
                        value = getattr(point, which) if which else None
                        items.append(_metric_point(base, point, value=value))
                    elif kind == "summary":
                        items.append(_metric_point(base, point, count=point.count, sum=point.sum))
                    else:
                        items.append(
                            _metric_point(
                                base,
                                point,
                                count=point.count,
                                sum=point.sum if point.HasField("sum") else None,
                                min=point.min if point.HasField("min") else None,
                                max=point.max if point.HasField("max") else None,
                                bucket_counts=list(point.bucket_counts) if kind == "histogram" else None,
                                explicit_bounds=list(point.explicit_bounds) if kind == "histogram" else None,
                            )
                        )
    return items


def _decode_logs(request: Message) -> list[Item]:
    assert isinstance(request, logs_service_pb2.ExportLogsServiceRequest)
    items: list[Item] = []
    for resource_logs in request.resource_logs:
        resource = _attributes(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                attributes = _attributes(record.attributes)
                items.append(
                    {
                        "event_name": record.event_name or attributes.get("event.name"),
                        "body": _any_value(record.body),
                        "severity_number": record.severity_number,
                        "severity_text": record.severity_text,
                        "attributes": attributes,
                        "trace_id": _hex_or_none(record.trace_id),
                        "span_id": _hex_or_none(record.span_id),
                        "time_ns": record.time_unix_nano,
                        "observed_time_ns": record.observed_time_unix_nano,
                        "resource": resource,
                        "scope": scope_logs.scope.name,
                    }
                )
    return items


_DECODERS: dict[Signal, Callable[[Message], list[Item]]] = {
    "traces": _decode_traces,
    "metrics": _decode_metrics,
    "logs": _decode_logs,
}


# ------------------------------------------------------------------------------------------------------------
# Decode-free counting (count-only mode)
# ------------------------------------------------------------------------------------------------------------


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def _count_path(buf: bytes, start: int, end: int, path: tuple[int, ...]) -> int:
    """Count the length-delimited fields reached by following ``path`` (field numbers), skipping the rest.

    Only tags and lengths are read: the leaves (spans, log records, metrics) are never decoded, which is what
    lets the count-only receiver keep up with the throughput benchmark.
    """
    wanted, rest = path[0], path[1:]
    count = 0
    pos = start
    while pos < end:
        tag = buf[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = _read_varint(buf, pos)
        wire_type = tag & 7
        if wire_type == 2:
            length = buf[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _read_varint(buf, pos)
            if tag >> 3 == wanted:
                count += _count_path(buf, pos, pos + length, rest) if rest else 1
            pos += length
        elif wire_type == 0:
            _, pos = _read_varint(buf, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        else:
            raise DecodeError(f"unsupported protobuf wire type {wire_type} at offset {pos}")
    if pos != end:
        raise DecodeError(f"field overruns its message ({pos} > {end})")
    return count


# Every export request nests its items three levels deep under field 1 -> 2 -> 2: resource_spans/scope_spans/
# spans, resource_logs/scope_logs/log_records, resource_metrics/scope_metrics/metrics.
_ITEM_PATH = (1, 2, 2)


def count_items(payload: bytes) -> int:
    """Count spans, log records or metrics in a serialized export request without decoding them.

    Args:
        payload: A serialized ``Export{Trace,Logs,Metrics}ServiceRequest``.

    Returns:
        The number of spans / log records / metrics (not data points) in it.

    Raises:
        DecodeError: The payload is not well-formed protobuf.
    """
    try:
        return _count_path(payload, 0, len(payload), _ITEM_PATH)
    except IndexError as error:
        raise DecodeError("truncated protobuf payload") from error


# ------------------------------------------------------------------------------------------------------------
# Transports
# ------------------------------------------------------------------------------------------------------------


class _GrpcServicer:
    """The ``Export`` method for one signal, shaped like the generated ``*ServiceServicer`` classes."""

    def __init__(self, receiver: OtlpReceiver, spec: _SignalSpec) -> None:
        self._receiver = receiver
        self._spec = spec

    def Export(self, request: Message, context: grpc.ServicerContext) -> Message:
        return self._receiver._grpc_export(self._spec, request, None, context)


def _raw_grpc_handler(receiver: OtlpReceiver, spec: _SignalSpec) -> grpc.GenericRpcHandler:
    """A handler that receives the request as raw bytes (no deserializer), for count-only mode."""

    def export(raw: bytes, context: grpc.ServicerContext) -> bytes:
        payload: bytes = receiver._grpc_export(spec, None, raw, context).SerializeToString()
        return payload

    return grpc.method_handlers_generic_handler(
        spec.grpc_service, {"Export": grpc.unary_unary_rpc_method_handler(export)}
    )


_ADD_SERVICERS: dict[Signal, Callable[[Any, grpc.Server], None]] = {
    "traces": trace_service_pb2_grpc.add_TraceServiceServicer_to_server,
    "metrics": metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server,
    "logs": logs_service_pb2_grpc.add_LogsServiceServicer_to_server,
}


def _retry_info(delay_s: float) -> error_details_pb2.RetryInfo:
    info = error_details_pb2.RetryInfo()
    info.retry_delay.seconds = int(delay_s)
    info.retry_delay.nanos = round((delay_s - int(delay_s)) * 1e9)
    return info


class _HttpServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that can close its keep-alive connections, so stop() really stops.

    The stock server either joins handler threads without a deadline (``block_on_close``) or abandons them;
    an idle HTTP/1.1 keep-alive connection would park its thread in ``readline`` forever.  We track each
    connection with its thread, shut the sockets down on stop and join the threads with a deadline.
    """

    daemon_threads = True
    block_on_close = False

    def __init__(
        self, address: tuple[str, int], receiver: OtlpReceiver, tls: ssl.SSLContext | None = None
    ) -> None:
        self.receiver = receiver
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        self._tls = tls
        super().__init__(address, _HttpHandler)

    def get_request(self) -> tuple[socket.socket, Any]:
        request, client_address = super().get_request()
        if self._tls is not None:
            # The handshake runs on the connection's own thread (first read), never in the accept loop.
            request = self._tls.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        return request, client_address

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ssl.SSLError, ConnectionError)):
            return  # a client that does not trust our certificate hangs up mid-handshake: expected in TLS tests
        super().handle_error(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        # Registered here, in the accept loop, so a connection accepted just before shutdown() is not missed.
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name=f"otlp-receiver-http-{client_address[1]}",
            daemon=True,
        )
        with self._connections_lock:
            self._connections[request] = thread
        thread.start()

    def _serve_connection(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._connections_lock:
                self._connections.pop(request, None)

    def close_connections(self, timeout_s: float) -> None:
        """Shut down every open connection and join its thread, waiting at most ``timeout_s`` in total."""
        with self._connections_lock:
            connections = dict(self._connections)
        for sock in connections:
            with contextlib.suppress(OSError):  # already closed by the client or the handler
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout_s
        for thread in connections.values():
            thread.join(max(deadline - time.monotonic(), 0.0))


class _HttpHandler(BaseHTTPRequestHandler):
    """POST /v1/{traces,metrics,logs} with OTLP protobuf or JSON bodies, optionally gzip/deflate encoded."""

    # HTTP/1.1 keep-alive, as real collectors speak and as the benchmark needs to avoid a connect per batch.
    protocol_version = "HTTP/1.1"
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request stderr line; the receiver keeps its own request log."""

    def do_POST(self) -> None:
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (e.g. timeout_after_accept): nothing left to answer.
            self.close_connection = True

    def _post(self) -> None:
        length_header = self.headers.get("Content-Length", "")
        if not length_header.isdigit():
            # Chunked uploads are not supported; the SDK exporters always send Content-Length.
            self.close_connection = True  # the body's extent is unknown, so the stream cannot be reused
            self._send_plain(411, "Content-Length required")
            return
        body = self.rfile.read(int(length_header))
        spec = _SPECS_BY_PATH.get(self.path.split("?", 1)[0])
        if spec is None:
            self._send_plain(404, f"unknown OTLP path {self.path!r}")
            return
        limit = self.server.receiver.http_max_body
        if limit is not None and len(body) > limit:
            self.server.receiver._record(spec, "http", "too_large", 0, time.time_ns())
            self._send_plain(413, f"request body too large: {len(body)} bytes, the limit is {limit}")
            return
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        is_json = content_type == _CONTENT_JSON
        reply = self.server.receiver._http_export(
            spec, body, content_type, (self.headers.get("Content-Encoding") or "identity").strip().lower()
        )
        if reply.hold_s:
            self.server.receiver._hold(reply.hold_s)
        if reply.response is not None:
            self._send_message(reply.http_status, reply.response, is_json)
            return
        status = status_pb2.Status(
            code=(reply.grpc_code or grpc.StatusCode.UNKNOWN).value[0], message=reply.message
        )
        headers = {}
        if reply.retry_after_s is not None:
            status.details.append(_pack(_retry_info(reply.retry_after_s)))
            # RFC 9110 wants whole seconds; fractional values are sent as-is because the SDK parses floats and
            # sub-second delays keep the tests fast.
            headers["Retry-After"] = f"{reply.retry_after_s:g}"
        self._send_message(reply.http_status, status, is_json, headers)

    def _send_message(
        self, status: int, message: Message, is_json: bool, headers: Mapping[str, str] | None = None
    ) -> None:
        if is_json:
            self._send(status, json_format.MessageToJson(message).encode(), _CONTENT_JSON, headers)
        else:
            self._send(status, message.SerializeToString(), _CONTENT_PROTOBUF, headers)

    def _send_plain(self, status: int, text: str) -> None:
        self._send(status, text.encode(), "text/plain; charset=utf-8")

    def _send(
        self, status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def _pack(message: Message) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


def _reject_all(response: Any, field: str, count: int, message: str) -> None:
    """Fill an Export*ServiceResponse's ``partial_success`` (typed ``Any``: the field differs per signal)."""
    setattr(response.partial_success, field, count)
    response.partial_success.error_message = message


def _decompress(body: bytes, encoding: str) -> bytes:
    if encoding in ("", "identity", "none"):
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    raise ValueError(f"unsupported Content-Encoding {encoding!r}")


def _hex_ids_to_base64(node: Any) -> Any:
    """Rewrite OTLP/JSON's hex trace/span ids to the base64 that protobuf's JSON parser expects for bytes."""
    if isinstance(node, dict):
        return {
            key: (
                base64.b64encode(bytes.fromhex(value)).decode()
                if key in _HEX_ID_KEYS and isinstance(value, str)
                else _hex_ids_to_base64(value)
            )
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids_to_base64(value) for value in node]
    return node


def _parse_json(body: bytes, message: Message) -> None:
    json_format.ParseDict(_hex_ids_to_base64(json.loads(body)), message, ignore_unknown_fields=True)


# ------------------------------------------------------------------------------------------------------------
# The receiver
# ------------------------------------------------------------------------------------------------------------


class OtlpReceiver:
    """An OTLP/gRPC + OTLP/HTTP server on 127.0.0.1 that stores what it accepts and fails on demand.

    Both transports share one store, one fault script and one request log.  Every public method is thread-safe
    and may be called while the receiver is running.  ``stop()`` followed by ``start()`` listens again on the
    *same* ports, which is how tests simulate a collector going down and coming back.

    Args:
        grpc_port: Port for OTLP/gRPC; 0 picks a free one on the first ``start()`` and keeps it afterwards.
        http_port: Port for OTLP/HTTP; same rule.
        store: Keep accepted items in memory (``spans()`` etc.).  Subprocess mode turns this off so a long
            benchmark does not grow without bound; the request log and counters are kept either way.
        count_only: Never decode spans, metrics or logs: gRPC requests arrive as raw bytes and items are
            counted from the protobuf framing (`count_items`).  Nothing is stored and ``reject_when``
            predicates are ignored; ``on_accept`` gets ``items=None``.
        on_accept: Called for every request whose data was stored, before the client is answered.
        tls: ``(certificate chain file, private key file)`` (PEM): serve OTLP/HTTP as HTTPS and OTLP/gRPC over TLS
            (endpoints then start with ``https://``).
        client_ca: With ``tls``: require a client certificate signed by this CA (PEM), i.e. mutual TLS.
        accept_only: Serve only these signals; the others are answered HTTP 404 / gRPC ``UNIMPLEMENTED`` (outcome
            ``refused``, nothing stored), always, as a traces-only backend (Arize Phoenix) answers logs and
            metrics. ``None``: all three.
        grpc_max_message: The gRPC server's ``max_receive_message_length``; ``None`` keeps gRPC's default (4 MiB,
            what an OpenTelemetry Collector keeps), which answers a larger request ``RESOURCE_EXHAUSTED`` itself.
        http_max_body: Answer HTTP 413 (outcome ``too_large``, nothing stored) to a body larger than this many
            bytes, as a collector or a proxy in front of one does; ``None``: no limit.
    """

    def __init__(
        self,
        grpc_port: int = 0,
        http_port: int = 0,
        *,
        store: bool = True,
        count_only: bool = False,
        on_accept: AcceptSink | None = None,
        tls: tuple[Path, Path] | None = None,
        client_ca: Path | None = None,
        accept_only: Iterable[Signal] | None = None,
        grpc_max_message: int | None = _MAX_MESSAGE_BYTES,
        http_max_body: int | None = None,
    ) -> None:
        self._grpc_max_message = grpc_max_message
        self.http_max_body = http_max_body
        self._accept_only = frozenset(SIGNALS if accept_only is None else accept_only)
        self._tls = tls
        self._client_ca = client_ca
        self._grpc_port = grpc_port
        self._http_port = http_port
        self._store = store and not count_only
        self._count_only = count_only
        self._on_accept = on_accept
        # RLock so wait_for() predicates can call spans()/metrics()/logs() while the condition holds the lock.
        self._cond = threading.Condition(threading.RLock())
        self._spans: list[Item] = []
        self._metrics: list[Item] = []
        self._logs: list[Item] = []
        self._request_log: list[RequestRecord] = []
        self._request_counts: collections.Counter[Signal] = collections.Counter()
        self._faults: dict[Signal | None, collections.deque[Fault]] = {
            key: collections.deque() for key in (*SIGNALS, None)
        }
        self._reject_predicates: list[SpanPredicate] = []
        self._partial_predicates: list[SpanPredicate] = []
        # Set while stopping so handlers parked in timeout_after_accept return at once instead of at delay_s.
        self._stopping = threading.Event()
        self._lifecycle_lock = threading.Lock()
        self._grpc_server: grpc.Server | None = None
        self._grpc_executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._http_server: _HttpServer | None = None
        self._http_thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> OtlpReceiver:
        """Bind both ports and start serving.

        Returns:
            ``self``, so ``receiver = OtlpReceiver().start()`` works.

        Raises:
            RuntimeError: Already running, or a port could not be bound (e.g. taken while we were stopped).
        """
        with self._lifecycle_lock:
            if self._grpc_server is not None:
                raise RuntimeError("OtlpReceiver is already running")
            self._stopping.clear()
            executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=_GRPC_WORKERS, thread_name_prefix="otlp-receiver-grpc"
            )
            options: list[tuple[str, int]] = [
                # Without this a second server could silently share the port (Linux SO_REUSEPORT) instead
                # of failing, and restart-on-the-same-port tests would prove nothing.
                ("grpc.so_reuseport", 0),
            ]
            if self._grpc_max_message is not None:
                options.append(("grpc.max_receive_message_length", self._grpc_max_message))
            server = grpc.server(executor, options=options)
            for spec in _SPECS.values():
                if self._count_only:
                    server.add_generic_rpc_handlers((_raw_grpc_handler(self, spec),))
                else:
                    _ADD_SERVICERS[spec.signal](_GrpcServicer(self, spec), server)
            try:
                if self._tls is None:
                    port = server.add_insecure_port(f"{_HOST}:{self._grpc_port}")
                else:
                    chain, key = (path.read_bytes() for path in self._tls)
                    client_ca = self._client_ca.read_bytes() if self._client_ca is not None else None
                    credentials = grpc.ssl_server_credentials(
                        [(key, chain)], root_certificates=client_ca, require_client_auth=client_ca is not None
                    )
                    port = server.add_secure_port(f"{_HOST}:{self._grpc_port}", credentials)
            except RuntimeError as error:
                port = 0
                bind_error: Exception | None = error
            else:
                bind_error = None
            if port == 0:
                executor.shutdown(wait=False)
                raise RuntimeError(f"cannot bind OTLP/gRPC to {_HOST}:{self._grpc_port}") from bind_error
            try:
                http_server = _HttpServer((_HOST, self._http_port), self, self._http_tls())
            except OSError as error:
                executor.shutdown(wait=False)
                raise RuntimeError(f"cannot bind OTLP/HTTP to {_HOST}:{self._http_port}: {error}") from error
            server.start()
            self._grpc_port = port
            self._http_port = http_server.server_address[1]
            self._grpc_server, self._grpc_executor = server, executor
            self._http_server = http_server
            self._http_thread = threading.Thread(
                target=http_server.serve_forever,
                kwargs={"poll_interval": _HTTP_POLL_INTERVAL_S},
                name="otlp-receiver-http",
                daemon=True,
            )
            self._http_thread.start()
            return self

    def stop(self) -> None:
        """Stop listening on both ports, drop open connections and end every thread we started.

        In-flight requests are cancelled (gRPC) or cut off (HTTP); requests held by ``timeout_after_accept``
        are released immediately.  Stored data, the request log and pending faults survive, so a later
        ``start()`` behaves like a collector restarted behind the same address.  A second call is a no-op.
        """
        with self._lifecycle_lock:
            if self._grpc_server is None:
                return
            self._stopping.set()
            assert self._http_server is not None and self._http_thread is not None
            assert self._grpc_executor is not None
            self._http_server.shutdown()  # returns once serve_forever() has left its loop
            self._http_server.close_connections(_STOP_TIMEOUT_S)
            self._http_server.server_close()
            self._http_thread.join(_STOP_TIMEOUT_S)
            self._grpc_server.stop(grace=None).wait(_STOP_TIMEOUT_S)
            # Handlers are bounded (holds were released above), so this join cannot hang.
            self._grpc_executor.shutdown(wait=True, cancel_futures=True)
            self._grpc_server = self._grpc_executor = None
            self._http_server = self._http_thread = None

    def _http_tls(self) -> ssl.SSLContext | None:
        if self._tls is None:
            return None
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*map(str, self._tls))
        if self._client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=str(self._client_ca))
        return context

    @property
    def running(self) -> bool:
        """Whether the receiver is currently listening."""
        return self._grpc_server is not None

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------------------------------------

    @property
    def grpc_port(self) -> int:
        """The OTLP/gRPC port (known after the first ``start()`` when constructed with 0)."""
        return self._require_port(self._grpc_port)

    @property
    def http_port(self) -> int:
        """The OTLP/HTTP port (known after the first ``start()`` when constructed with 0)."""
        return self._require_port(self._http_port)

    @property
    def grpc_endpoint(self) -> str:
        """``http://127.0.0.1:PORT``, as the gRPC exporters' ``endpoint`` expects (with ``insecure=True``);
        ``https://`` when serving TLS."""
        return f"{self._scheme}://{_HOST}:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        """``http://127.0.0.1:PORT`` without a signal path: HTTP exporters need ``/v1/<signal>`` appended;
        ``https://`` when serving TLS."""
        return f"{self._scheme}://{_HOST}:{self.http_port}"

    @property
    def _scheme(self) -> str:
        return "http" if self._tls is None else "https"

    @staticmethod
    def _require_port(port: int) -> int:
        if port == 0:
            raise RuntimeError("port not known yet: start() the receiver first")
        return port

    # -- received data ---------------------------------------------------------------------------------------

    def spans(self) -> list[Item]:
        """Every accepted span as a flat dict, in arrival order (treat the dicts as read-only).

        Keys: ``trace_id`` (32 hex), ``span_id`` (16 hex), ``parent_span_id`` (16 hex or ``None``), ``name``,
        ``kind`` (int), ``start_ns``, ``end_ns``, ``attributes``, ``status_code`` (int), ``status_message``,
        ``events`` (``[{name, time_ns, attributes}]``), ``links`` (``[{trace_id, span_id, attributes}]``),
        ``resource`` (resource attributes) and ``scope`` (instrumentation scope name).
        """
        with self._cond:
            return list(self._spans)

    def metrics(self) -> list[Item]:
        """Every accepted metric data point as a flat dict, in arrival order.

        Keys: ``name``, ``unit``, ``description``, ``type`` (``sum``/``gauge``/``histogram``/
        ``exponential_histogram``/``summary``), ``attributes``, ``value`` (sum, gauge), ``count``, ``sum``,
        ``min``, ``max`` (histograms), ``bucket_counts``, ``explicit_bounds`` (explicit histogram),
        ``is_monotonic`` (sum), ``temporality`` (int ``AggregationTemporality``; ``None`` for gauges),
        ``start_time_ns``, ``time_ns``, ``resource``, ``scope``.  Keys that do not apply are ``None``.
        """
        with self._cond:
            return list(self._metrics)

    def logs(self) -> list[Item]:
        """Every accepted log record as a flat dict, in arrival order.

        Keys: ``event_name`` (the ``event_name`` field, else the ``event.name`` attribute, else ``None``),
        ``body`` (decoded ``AnyValue``), ``severity_number``, ``severity_text``, ``attributes``, ``trace_id``,
        ``span_id`` (hex or ``None``), ``time_ns``, ``observed_time_ns``, ``resource``, ``scope``.
        """
        with self._cond:
            return list(self._logs)

    @property
    def requests(self) -> dict[Signal, int]:
        """Requests received per signal, whatever their outcome."""
        with self._cond:
            return {signal: self._request_counts[signal] for signal in SIGNALS}

    def request_log(self, signal: Signal | None = None) -> list[RequestRecord]:
        """One `RequestRecord` per request received (optionally for one signal), in arrival order."""
        with self._cond:
            return [record for record in self._request_log if signal is None or record.signal == signal]

    def clear(self) -> None:
        """Forget stored items, the request log and the counters; scripted faults and predicates stay."""
        with self._cond:
            self._spans.clear()
            self._metrics.clear()
            self._logs.clear()
            self._request_log.clear()
            self._request_counts.clear()

    def wait_for(self, predicate: Callable[[OtlpReceiver], bool], timeout: float = 10.0) -> None:
        """Block until ``predicate(self)`` holds, re-checking whenever a request has been handled.

        Args:
            predicate: Called with the receiver's lock held; it may call ``spans()`` and friends.
            timeout: Seconds to wait before giving up.

        Raises:
            TimeoutError: The predicate was still false after ``timeout``; the message says what arrived.
        """
        with self._cond:
            if self._cond.wait_for(lambda: predicate(self), timeout):
                return
            recent = ", ".join(
                f"{r.transport}/{r.signal}:{r.outcome}({r.item_count})" for r in self._request_log[-10:]
            )
            raise TimeoutError(
                f"condition {getattr(predicate, '__name__', predicate)!s} not met within {timeout}s: "
                f"received {len(self._spans)} spans, {len(self._metrics)} metric points, "
                f"{len(self._logs)} log records; requests {dict(self._request_counts) or 'none'}; "
                f"last requests: [{recent}]"
            )

    def wait_for_spans(self, count: int, timeout: float = 10.0) -> list[Item]:
        """Wait until at least ``count`` spans were accepted and return all of them."""
        self.wait_for(lambda receiver: len(receiver._spans) >= count, timeout)
        return self.spans()

    # -- fault injection -------------------------------------------------------------------------------------

    def fail_next(
        self,
        n: int = 1,
        kind: FaultKind = "unavailable",
        *,
        signal: Signal | None = None,
        retry_after_s: float = 1.0,
        delay_s: float = 3.0,
        message: str | None = None,
        http_status: int = 401,
        grpc_code: str = "UNAUTHENTICATED",
    ) -> None:
        """Script the answer to the next ``n`` requests (of ``signal``, or of any signal when ``None``).

        Faults queue up behind earlier ones.  A request consumes from its own signal's queue first, then from
        the any-signal queue.  Kinds:

        * ``unavailable``: HTTP 503 / gRPC UNAVAILABLE (transient; the SDK retries with backoff).
        * ``retry_after``: HTTP 429 with ``Retry-After: retry_after_s`` / gRPC RESOURCE_EXHAUSTED with a
          ``google.rpc.RetryInfo`` (as ``google.rpc.retryinfo-bin``, which the SDK reads, and inside
          ``grpc-status-details-bin``).
        * ``bad_request``: HTTP 400 / gRPC INVALID_ARGUMENT (permanent; the SDK gives up at once).
        * ``timeout_after_accept``: store the data, then hold the answer ``delay_s`` seconds, so a client with
          a shorter timeout sees a failure although the data landed (the duplicate-on-retry case).
        * ``partial_reject``: answer success with ``partial_success`` rejecting every item of the request,
          with an error message; the rejected items are not stored.
        * ``refuse``: answer HTTP ``http_status`` / gRPC ``grpc_code`` (what a collector says about the caller
          rather than the data: 401, 403, 404, 407, UNAUTHENTICATED, PERMISSION_DENIED, UNIMPLEMENTED).

        Only ``timeout_after_accept`` stores the request's data.

        Raises:
            ValueError: Unknown ``kind`` or ``signal``, or negative ``n``.
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"Expected kind to be one of {FAULT_KINDS}, got {kind!r}")
        if signal is not None and signal not in SIGNALS:
            raise ValueError(f"Expected signal to be one of {SIGNALS} or None, got {signal!r}")
        if n < 0:
            raise ValueError(f"Expected n >= 0, got {n!r}")
        if grpc_code not in grpc.StatusCode.__members__:
            raise ValueError(f"Expected grpc_code to be a grpc.StatusCode name, got {grpc_code!r}")
        fault = Fault(
            kind,
            retry_after_s,
            delay_s,
            message or f"scripted {kind} from OtlpReceiver",
            http_status,
            grpc_code,
        )
        with self._cond:
            self._faults[signal].extend([fault] * n)

    def reject_when(self, predicate: SpanPredicate) -> None:
        """Permanently reject (HTTP 400 / INVALID_ARGUMENT) every traces request containing a matching span.

        For dead-letter tests: the request's other spans are not stored either, exactly like a collector that
        refuses a whole batch.  Predicates accumulate; ``reset_faults()`` removes them.
        """
        with self._cond:
            self._reject_predicates.append(predicate)

    def partial_reject_when(self, predicate: SpanPredicate) -> None:
        """Answer a traces request containing matching spans with a partial success: the other spans are stored,
        the matching ones are not, and ``partial_success.rejected_spans`` counts them (which ones is not said, as
        OTLP has it). Predicates accumulate; ``reset_faults()`` removes them."""
        with self._cond:
            self._partial_predicates.append(predicate)

    def pending_faults(self, signal: Signal | None = None) -> int:
        """Scripted faults not consumed yet: for ``signal`` alone, or in all queues when ``None``."""
        with self._cond:
            if signal is not None:
                return len(self._faults[signal])
            return sum(len(queue) for queue in self._faults.values())

    def reset_faults(self) -> None:
        """Drop every scripted fault and every ``reject_when`` predicate."""
        with self._cond:
            for queue in self._faults.values():
                queue.clear()
            self._reject_predicates.clear()
            self._partial_predicates.clear()

    # -- request handling (called from transport threads) ----------------------------------------------------

    def _hold(self, seconds: float) -> None:
        self._stopping.wait(seconds)

    def _record(
        self,
        spec: _SignalSpec,
        transport: Transport,
        outcome: Outcome,
        count: int,
        received_ns: int,
        items: list[Item] | None = None,
    ) -> None:
        """Store ``items`` (if storing) and log the request in one step, so waiters never see half of it."""
        with self._cond:
            if items and self._store:
                {"traces": self._spans, "metrics": self._metrics, "logs": self._logs}[spec.signal].extend(
                    items
                )
            self._request_counts[spec.signal] += 1
            self._request_log.append(RequestRecord(spec.signal, transport, outcome, count, received_ns))
            self._cond.notify_all()

    def _handle(
        self, spec: _SignalSpec, transport: Transport, request: Message | None, raw: bytes | None
    ) -> _Reply:
        """Decide the fate of one well-formed request, store it if accepted and log it."""
        received_ns = time.time_ns()
        items: list[Item] | None = None
        if self._count_only:
            if raw is None:
                assert request is not None
                raw = request.SerializeToString()
            count = count_items(raw)
        else:
            if request is None:
                assert raw is not None
                request = spec.request_type.FromString(raw)
            items = _DECODERS[spec.signal](request)
            count = len(items)
        if spec.signal not in self._accept_only:  # not served at all: no scripted fault is used up
            message = f"this server does not serve OTLP {spec.signal}"
            reply = _Reply("refused", None, grpc.StatusCode.UNIMPLEMENTED, 404, message)
            self._record(spec, transport, reply.outcome, count, received_ns, None)
            return reply
        with self._cond:
            queue = self._faults[spec.signal] or self._faults[None]
            fault = queue.popleft() if queue else None
            predicates = tuple(self._reject_predicates)
            partial = tuple(self._partial_predicates)

        reply = self._decide(spec, fault, items, count, predicates)
        if reply.outcome == "accepted" and spec.signal == "traces" and items and partial:
            kept = [item for item in items if not any(predicate(item) for predicate in partial)]
            if len(kept) < len(items):
                response = spec.response_type()
                message = f"{len(items) - len(kept)} spans rejected by partial_reject_when"
                _reject_all(response, spec.partial_success_field, len(items) - len(kept), message)
                reply, items = _Reply("partial_accept", response), kept
        stored = reply.outcome in ("accepted", "timeout_after_accept", "partial_accept")
        if stored and self._on_accept is not None:
            self._on_accept(spec.signal, items, count, received_ns)
        self._record(spec, transport, reply.outcome, count, received_ns, items if stored else None)
        return reply

    @staticmethod
    def _decide(
        spec: _SignalSpec,
        fault: Fault | None,
        items: list[Item] | None,
        count: int,
        predicates: Sequence[SpanPredicate],
    ) -> _Reply:
        if fault is not None and fault.kind == "unavailable":
            return _Reply("unavailable", None, grpc.StatusCode.UNAVAILABLE, 503, fault.message)
        if fault is not None and fault.kind == "retry_after":
            return _Reply(
                "retry_after",
                None,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                429,
                fault.message,
                fault.retry_after_s,
            )
        if fault is not None and fault.kind == "bad_request":
            return _Reply("bad_request", None, grpc.StatusCode.INVALID_ARGUMENT, 400, fault.message)
        if fault is not None and fault.kind == "refuse":
            code = grpc.StatusCode[fault.grpc_code]
            return _Reply("refused", None, code, fault.http_status, fault.message)
        if spec.signal == "traces" and items and predicates:
            for item in items:
                if any(predicate(item) for predicate in predicates):
                    message = f"span {item['name']!r} ({item['span_id']}) rejected by reject_when predicate"
                    return _Reply("rejected", None, grpc.StatusCode.INVALID_ARGUMENT, 400, message)
        response = spec.response_type()
        if fault is not None and fault.kind == "partial_reject":
            _reject_all(response, spec.partial_success_field, count, fault.message)
            return _Reply("partial_reject", response)
        if fault is not None and fault.kind == "timeout_after_accept":
            return _Reply("timeout_after_accept", response, hold_s=fault.delay_s)
        return _Reply("accepted", response)

    def _grpc_export(
        self, spec: _SignalSpec, request: Message | None, raw: bytes | None, context: grpc.ServicerContext
    ) -> Message:
        reply = self._handle(spec, "grpc", request, raw)
        if reply.hold_s:
            self._hold(reply.hold_s)
        if reply.response is not None:
            return reply.response
        assert reply.grpc_code is not None
        self._grpc_abort(context, reply)

    @staticmethod
    def _grpc_abort(context: grpc.ServicerContext, reply: _Reply) -> NoReturn:
        assert reply.grpc_code is not None
        if reply.retry_after_s is not None:
            info = _retry_info(reply.retry_after_s)
            status = status_pb2.Status(
                code=reply.grpc_code.value[0], message=reply.message, details=[_pack(info)]
            )
            context.set_trailing_metadata(
                (
                    # What the OTel SDK's gRPC exporter reads.
                    ("google.rpc.retryinfo-bin", info.SerializeToString()),
                    # The standard rich-status carrier (what grpcio-status' abort_with_status sends).
                    ("grpc-status-details-bin", status.SerializeToString()),
                )
            )
        context.abort(reply.grpc_code, reply.message)
        raise AssertionError("unreachable: ServicerContext.abort() always raises")

    def _http_export(self, spec: _SignalSpec, body: bytes, content_type: str, encoding: str) -> _Reply:
        received_ns = time.time_ns()
        if content_type not in (_CONTENT_PROTOBUF, _CONTENT_JSON):
            self._record(spec, "http", "malformed", 0, received_ns)
            return _Reply(
                "malformed", None, grpc.StatusCode.INVALID_ARGUMENT, 415, f"unsupported {content_type!r}"
            )
        try:
            body = _decompress(body, encoding)
            request: Message | None
            if content_type == _CONTENT_JSON:
                request, raw = spec.request_type(), None
                _parse_json(body, request)
            elif self._count_only:
                request, raw = None, body
                count_items(raw)  # validate before a fault is consumed
            else:
                request, raw = spec.request_type.FromString(body), None
        except (ValueError, OSError, EOFError, zlib.error, DecodeError, json_format.ParseError) as error:
            self._record(spec, "http", "malformed", 0, received_ns)
            return _Reply(
                "malformed", None, grpc.StatusCode.INVALID_ARGUMENT, 400, f"undecodable body: {error}"
            )
        return self._handle(spec, "http", request, raw)


# ------------------------------------------------------------------------------------------------------------
# Subprocess mode
# ------------------------------------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot serialise {type(value).__name__}")


try:
    import orjson

    def _dumps(item: Item) -> bytes:
        return orjson.dumps(item, default=_json_default)

except ImportError:  # pragma: no cover - orjson is a project dependency; stay runnable without it

    def _dumps(item: Item) -> bytes:
        return json.dumps(item, default=_json_default, separators=(",", ":")).encode()


class _JsonLinesSink:
    """Appends accepted items as a JSON line (plus ``signal`` and ``received_ns``), flushed per request."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("ab")
        self._lock = threading.Lock()

    def __call__(self, signal: Signal, items: list[Item] | None, count: int, received_ns: int) -> None:
        payload = b"".join(
            _dumps({**item, "signal": signal, "received_ns": received_ns}) + b"\n" for item in items or ()
        )
        with self._lock:
            self._file.write(payload)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


class _CountSink:
    """Counts accepted items per signal; `write` replaces the file atomically with the running totals."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {"spans": 0, "metrics": 0, "logs": 0, "requests": 0}
        self._first_ns: int | None = None
        self._last_ns: int | None = None

    def __call__(self, signal: Signal, items: list[Item] | None, count: int, received_ns: int) -> None:
        key = {"traces": "spans", "metrics": "metrics", "logs": "logs"}[signal]
        with self._lock:
            self._counts[key] += count
            self._counts["requests"] += 1
            if self._first_ns is None:
                self._first_ns = received_ns
            self._last_ns = received_ns

    def write(self) -> None:
        with self._lock:
            snapshot = {
                **self._counts,
                "first_received_ns": self._first_ns,
                "last_received_ns": self._last_ns,
                "time_ns": time.time_ns(),
            }
        tmp = self._path.with_name(self._path.name + ".tmp")
        tmp.write_bytes(_dumps(snapshot) + b"\n")
        os.replace(tmp, self._path)  # readers never see a half-written count

    def close(self) -> None:
        self.write()


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    """SIGTERM behaves like Ctrl-C (``docker compose stop`` and ``Popen.terminate()`` send it)."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run an OTLP receiver in its own process until SIGTERM/SIGINT.

    Without --count-only every accepted span, metric point and log record is appended to --out as one JSON
    line (the same flat dict as ``OtlpReceiver.spans()`` etc. plus "signal" and "received_ns"), flushed before
    the client is answered.  With --count-only nothing is decoded; --out is atomically rewritten every
    --interval-s (and on exit) with {"spans", "metrics", "logs", "requests", "first_received_ns",
    "last_received_ns", "time_ns"}.
    """
    parser = argparse.ArgumentParser(prog="otlp_receiver.py", description=main.__doc__)
    parser.add_argument("--grpc-port", type=int, default=0, help="OTLP/gRPC port (0 = pick a free one)")
    parser.add_argument("--http-port", type=int, default=0, help="OTLP/HTTP port (0 = pick a free one)")
    parser.add_argument(
        "--out", type=Path, required=True, help="file receiving JSON lines or the running count"
    )
    parser.add_argument("--count-only", action="store_true", help="count items without decoding them")
    parser.add_argument(
        "--interval-s", type=float, default=0.2, help="count-only: how often --out is rewritten"
    )
    args = parser.parse_args(argv)

    sink: _JsonLinesSink | _CountSink = _CountSink(args.out) if args.count_only else _JsonLinesSink(args.out)
    receiver = OtlpReceiver(
        args.grpc_port, args.http_port, store=False, count_only=args.count_only, on_accept=sink
    )
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    idle = threading.Event()  # never set: the main thread only waits here until a signal interrupts it
    try:
        receiver.start()
        if isinstance(sink, _CountSink):
            sink.write()
        print(f"READY grpc={receiver.grpc_port} http={receiver.http_port}", flush=True)
        while True:
            idle.wait(args.interval_s)
            if isinstance(sink, _CountSink):
                sink.write()
    except KeyboardInterrupt:
        pass
    finally:
        # A second SIGTERM during shutdown must not abort the final flush.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        receiver.stop()
        sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
