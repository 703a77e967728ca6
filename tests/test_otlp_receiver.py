"""Tests for the OTLP test receiver, driven by the real OpenTelemetry SDK OTLP exporters.

The receiver is the network edge every export test relies on, so it is checked against the exporters we ship
with: if it decoded something differently from a real collector, or answered a fault with a status the SDK
treats differently than intended, the export tests built on it would be meaningless.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import grpc
import pytest
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import (
    InMemoryLogRecordExporter,
    LogRecordExportResult,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult, MetricsData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from tests.otlp_receiver import OtlpReceiver, count_items

TransportName = Literal["grpc", "http"]
TRANSPORTS: tuple[TransportName, ...] = ("grpc", "http")
RESOURCE = Resource.create({"service.name": "copilot-otel-test", "host.name": "ci"})
RECEIVER_SCRIPT = Path(__file__).with_name("otlp_receiver.py")
# Exporter timeout for faults that must fail fast: shorter than the SDK's first backoff (0.8-1.2 s), so the
# exporter gives up after one attempt instead of retrying.
FAST_FAIL_TIMEOUT_S = 0.5


# -- SDK data builders ---------------------------------------------------------------------------------------


def make_trace() -> list[ReadableSpan]:
    """A parent/child pair with every field the receiver decodes, at fixed timestamps."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.otlp_receiver")
    root = tracer.start_span(
        "invoke_agent",
        kind=SpanKind.INTERNAL,
        start_time=1_000,
        attributes={
            "gen_ai.agent.name": "copilot",
            "turns": 3,
            "cost": 0.25,
            "ok": True,
            "tools": ["a", "b"],
        },
    )
    child = tracer.start_span(
        "execute_tool bash", context=trace.set_span_in_context(root), kind=SpanKind.CLIENT, start_time=2_000
    )
    child.add_event("gen_ai.tool.message", {"size": 3}, timestamp=2_500)
    child.set_status(Status(StatusCode.ERROR, "tool failed"))
    child.end(end_time=3_000)
    root.end(end_time=4_000)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def make_spans(*names: str) -> list[ReadableSpan]:
    """One root span per name."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests.otlp_receiver")
    for index, name in enumerate(names):
        tracer.start_span(name, start_time=1_000 + index).end(end_time=2_000 + index)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def make_metrics() -> MetricsData:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], resource=RESOURCE)
    meter = provider.get_meter("tests.otlp_receiver")
    meter.create_counter("copilot_otel.prompt.count", unit="{prompt}").add(3, {"outcome": "completed"})
    meter.create_histogram("gen_ai.client.operation.duration", unit="s").record(0.5, {"model": "m"})
    meter.create_gauge("copilot_otel.live.prompts", unit="{prompt}").set(7)
    data = reader.get_metrics_data()
    provider.shutdown()
    assert data is not None
    return data


def make_logs() -> tuple[list[ReadableLogRecord], ReadableSpan]:
    """Two log records inside one span: one with the event_name field, one with only an event.name attribute.

    Returns:
        The SDK log records and the span they were emitted in.
    """
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]  # SDK __init__ lacks "-> None"
    provider = LoggerProvider(resource=RESOURCE)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("tests.otlp_receiver")
    span_exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(resource=RESOURCE)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    with tracer_provider.get_tracer("t").start_as_current_span("prompt"):
        logger.emit(
            event_name="copilot_otel.prompt",
            body={"text": "hi", "n": 2},
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            attributes={"k": "v"},
            timestamp=5_000,
        )
        logger.emit(
            body="legacy", severity_number=SeverityNumber.WARN, attributes={"event.name": "legacy.event"}
        )
    provider.shutdown()
    tracer_provider.shutdown()
    return list(exporter.get_finished_logs()), span_exporter.get_finished_spans()[0]


# -- exporter factories --------------------------------------------------------------------------------------


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as started:
        yield started


@pytest.fixture
def shutdowns() -> Iterator[list[Callable[[], None]]]:
    """Exporter shutdown callbacks, run at teardown so no gRPC channel outlives its test."""
    callbacks: list[Callable[[], None]] = []
    yield callbacks
    for callback in callbacks:
        callback()


SpanExporterFactory = Callable[..., Any]


@pytest.fixture
def span_exporter(receiver: OtlpReceiver, shutdowns: list[Callable[[], None]]) -> SpanExporterFactory:
    """``span_exporter(transport, timeout=...)`` -> a real SDK OTLP span exporter aimed at ``receiver``."""

    def factory(transport: TransportName, timeout: float = 5.0, **kwargs: Any) -> Any:
        exporter: Any
        if transport == "grpc":
            exporter = GrpcSpanExporter(
                endpoint=receiver.grpc_endpoint, insecure=True, timeout=timeout, **kwargs
            )
        else:
            exporter = HttpSpanExporter(
                endpoint=f"{receiver.http_endpoint}/v1/traces", timeout=timeout, **kwargs
            )
        shutdowns.append(exporter.shutdown)
        return exporter

    return factory


def trace_stub(channel: grpc.Channel) -> Any:
    """A raw TraceService client, for what the SDK exporter does not surface (partial success, trailers)."""
    return trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]  # generated code


def outcomes(receiver: OtlpReceiver) -> list[str]:
    return [record.outcome for record in receiver.request_log()]


def raw_http_post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """POST without any client retry logic, returning (status, headers, body) for every status."""
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


# -- decoding ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_spans_arrive_decoded(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory, transport: TransportName
) -> None:
    sdk_spans = make_trace()
    child_ctx, root_ctx = sdk_spans[0].context, sdk_spans[1].context
    assert child_ctx is not None and root_ctx is not None

    assert span_exporter(transport).export(sdk_spans) is SpanExportResult.SUCCESS

    child, root = receiver.spans()
    assert root == {
        "trace_id": f"{root_ctx.trace_id:032x}",
        "span_id": f"{root_ctx.span_id:016x}",
        "parent_span_id": None,
        "name": "invoke_agent",
        "kind": 1,  # SPAN_KIND_INTERNAL
        "start_ns": 1_000,
        "end_ns": 4_000,
        "attributes": {
            "gen_ai.agent.name": "copilot",
            "turns": 3,
            "cost": 0.25,
            "ok": True,
            "tools": ["a", "b"],
        },
        "status_code": 0,
        "status_message": "",
        "events": [],
        "links": [],
        "resource": RESOURCE.attributes,
        "scope": "tests.otlp_receiver",
    }
    assert child["trace_id"] == root["trace_id"]
    assert child["parent_span_id"] == root["span_id"]
    assert child["kind"] == 3  # SPAN_KIND_CLIENT
    assert (child["status_code"], child["status_message"]) == (2, "tool failed")
    assert child["events"] == [{"name": "gen_ai.tool.message", "time_ns": 2_500, "attributes": {"size": 3}}]
    assert [(r.signal, r.transport, r.outcome, r.span_count) for r in receiver.request_log()] == [
        ("traces", transport, "accepted", 2)
    ]
    assert receiver.requests == {"traces": 1, "metrics": 0, "logs": 0}


def test_http_accepts_gzip(receiver: OtlpReceiver, span_exporter: SpanExporterFactory) -> None:
    exporter = span_exporter("http", compression=Compression.Gzip)
    assert exporter.export(make_spans("zipped")) is SpanExportResult.SUCCESS
    assert [span["name"] for span in receiver.spans()] == ["zipped"]


def test_http_accepts_otlp_json_with_hex_ids(receiver: OtlpReceiver) -> None:
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "json"}}]},
                "scopeSpans": [
                    {
                        "scope": {"name": "json-scope"},
                        "spans": [
                            {
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "parentSpanId": "eee19b7ec3c1b173",
                                "name": "from-json",
                                "kind": 2,
                                "startTimeUnixNano": "1544712660000000000",
                                "endTimeUnixNano": "1544712661000000000",
                                "attributes": [{"key": "n", "value": {"intValue": "42"}}],
                            }
                        ],
                    }
                ],
            }
        ]
    }
    status, headers, answer = raw_http_post(
        f"{receiver.http_endpoint}/v1/traces",
        gzip.compress(json.dumps(body).encode()),
        {"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert (status, headers["Content-Type"]) == (200, "application/json")
    assert json.loads(answer) == {}
    (span,) = receiver.spans()
    assert (span["trace_id"], span["span_id"], span["parent_span_id"]) == (
        "5b8efff798038103d269b633813fc60c",
        "eee19b7ec3c1b174",
        "eee19b7ec3c1b173",
    )
    assert (span["name"], span["kind"], span["start_ns"], span["attributes"]) == (
        "from-json",
        2,
        1544712660000000000,
        {"n": 42},
    )
    assert (span["resource"], span["scope"]) == ({"service.name": "json"}, "json-scope")


def test_http_malformed_body_is_rejected_without_consuming_a_fault(receiver: OtlpReceiver) -> None:
    receiver.fail_next(1, "unavailable")
    url = f"{receiver.http_endpoint}/v1/traces"
    assert raw_http_post(url, b"\xff\xff not protobuf", {"Content-Type": "application/x-protobuf"})[0] == 400
    assert raw_http_post(url, b"x", {"Content-Type": "text/plain"})[0] == 415
    assert (
        raw_http_post(f"{receiver.http_endpoint}/v1/nope", b"", {"Content-Type": "application/json"})[0]
        == 404
    )
    assert outcomes(receiver) == ["malformed", "malformed"]
    assert receiver.pending_faults() == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_metrics_arrive_decoded(
    receiver: OtlpReceiver, shutdowns: list[Callable[[], None]], transport: TransportName
) -> None:
    exporter: Any = (
        GrpcMetricExporter(endpoint=receiver.grpc_endpoint, insecure=True, timeout=5)
        if transport == "grpc"
        else HttpMetricExporter(endpoint=f"{receiver.http_endpoint}/v1/metrics", timeout=5)
    )
    shutdowns.append(exporter.shutdown)

    assert exporter.export(make_metrics()) is MetricExportResult.SUCCESS

    points = {point["name"]: point for point in receiver.metrics()}
    counter = points["copilot_otel.prompt.count"]
    assert (counter["type"], counter["unit"], counter["value"], counter["attributes"]) == (
        "sum",
        "{prompt}",
        3,
        {"outcome": "completed"},
    )
    assert (counter["is_monotonic"], counter["temporality"]) == (
        True,
        2,
    )  # AGGREGATION_TEMPORALITY_CUMULATIVE
    assert counter["resource"] == RESOURCE.attributes
    histogram = points["gen_ai.client.operation.duration"]
    assert (histogram["type"], histogram["count"], histogram["sum"], histogram["value"]) == (
        "histogram",
        1,
        0.5,
        None,
    )
    assert sum(histogram["bucket_counts"]) == 1
    assert len(histogram["bucket_counts"]) == len(histogram["explicit_bounds"]) + 1
    gauge = points["copilot_otel.live.prompts"]
    assert (gauge["type"], gauge["value"], gauge["is_monotonic"], gauge["temporality"]) == (
        "gauge",
        7,
        None,
        None,
    )
    assert [(r.signal, r.outcome, r.item_count) for r in receiver.request_log()] == [
        ("metrics", "accepted", 3)
    ]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_logs_arrive_decoded(
    receiver: OtlpReceiver, shutdowns: list[Callable[[], None]], transport: TransportName
) -> None:
    exporter: Any = (
        GrpcLogExporter(endpoint=receiver.grpc_endpoint, insecure=True, timeout=5)
        if transport == "grpc"
        else HttpLogExporter(endpoint=f"{receiver.http_endpoint}/v1/logs", timeout=5)
    )
    shutdowns.append(exporter.shutdown)
    records, span = make_logs()
    assert span.context is not None

    assert exporter.export(records) is LogRecordExportResult.SUCCESS

    event, legacy = receiver.logs()
    assert {
        key: event[key] for key in ("event_name", "body", "severity_number", "severity_text", "attributes")
    } == {
        "event_name": "copilot_otel.prompt",
        "body": {"text": "hi", "n": 2},
        "severity_number": SeverityNumber.INFO.value,
        "severity_text": "INFO",
        "attributes": {"k": "v"},
    }
    assert (event["trace_id"], event["span_id"]) == (
        f"{span.context.trace_id:032x}",
        f"{span.context.span_id:016x}",
    )
    assert (event["time_ns"], event["resource"], event["scope"]) == (
        5_000,
        RESOURCE.attributes,
        "tests.otlp_receiver",
    )
    assert (legacy["event_name"], legacy["body"], legacy["severity_number"]) == (
        "legacy.event",
        "legacy",
        SeverityNumber.WARN.value,
    )


# -- faults --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unavailable_is_retried_and_only_the_retry_is_stored(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory, transport: TransportName
) -> None:
    receiver.fail_next(1, "unavailable")
    assert span_exporter(transport).export(make_spans("a", "b")) is SpanExportResult.SUCCESS
    assert outcomes(receiver) == ["unavailable", "accepted"]
    assert [span["name"] for span in receiver.spans()] == ["a", "b"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unavailable_until_timeout_fails_and_stores_nothing(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory, transport: TransportName
) -> None:
    receiver.fail_next(5, "unavailable")
    exporter = span_exporter(transport, timeout=FAST_FAIL_TIMEOUT_S)
    assert exporter.export(make_spans("a")) is SpanExportResult.FAILURE
    assert outcomes(receiver) == ["unavailable"]
    assert receiver.spans() == []


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_retry_after_delay_is_honoured(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory, transport: TransportName
) -> None:
    receiver.fail_next(1, "retry_after", retry_after_s=0.3)
    exporter = span_exporter(transport)
    started = time.monotonic()
    assert exporter.export(make_spans("a")) is SpanExportResult.SUCCESS
    elapsed = time.monotonic() - started
    # The SDK's own first backoff is 0.8-1.2 s: finishing under it proves the server's delay was used.
    assert 0.3 <= elapsed < 0.8
    assert outcomes(receiver) == ["retry_after", "accepted"]
    assert len(receiver.spans()) == 1


def test_grpc_retry_after_carries_rich_status(receiver: OtlpReceiver) -> None:
    receiver.fail_next(1, "retry_after", retry_after_s=2.5)
    request = encode_spans(make_spans("a"))
    with (
        grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel,
        pytest.raises(grpc.RpcError) as raised,
    ):
        trace_stub(channel).Export(request, timeout=5)
    error: Any = raised.value
    assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    trailers = dict(error.trailing_metadata())
    info = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
    assert (info.retry_delay.seconds, info.retry_delay.nanos) == (2, 500_000_000)
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
    assert status.details[0].Is(error_details_pb2.RetryInfo.DESCRIPTOR)


def test_http_retry_after_header(receiver: OtlpReceiver) -> None:
    receiver.fail_next(1, "retry_after", retry_after_s=7)
    status, headers, body = raw_http_post(
        f"{receiver.http_endpoint}/v1/traces",
        encode_spans(make_spans("a")).SerializeToString(),
        {"Content-Type": "application/x-protobuf"},
    )
    assert (status, headers["Retry-After"]) == (429, "7")
    assert status_pb2.Status.FromString(body).message == "scripted retry_after from OtlpReceiver"
    assert receiver.spans() == []


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bad_request_is_permanent(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory, transport: TransportName
) -> None:
    receiver.fail_next(1, "bad_request")
    assert span_exporter(transport).export(make_spans("a")) is SpanExportResult.FAILURE
    assert outcomes(receiver) == ["bad_request"]  # export() is synchronous: a retry would show up here
    assert receiver.spans() == []


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_timeout_after_accept_stores_but_the_client_fails(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory, transport: TransportName
) -> None:
    receiver.fail_next(1, "timeout_after_accept", delay_s=30)
    exporter = span_exporter(transport, timeout=FAST_FAIL_TIMEOUT_S)
    assert exporter.export(make_spans("landed")) is SpanExportResult.FAILURE
    assert [span["name"] for span in receiver.spans()] == ["landed"]
    assert [(r.outcome, r.span_count) for r in receiver.request_log()] == [("timeout_after_accept", 1)]
    # The held request does not block others, and stop() releases it instead of waiting out delay_s.
    assert span_exporter(transport).export(make_spans("next")) is SpanExportResult.SUCCESS
    started = time.monotonic()
    receiver.stop()
    assert time.monotonic() - started < 2


def test_partial_reject_grpc(receiver: OtlpReceiver, span_exporter: SpanExporterFactory) -> None:
    receiver.fail_next(1, "partial_reject", message="quota")
    with grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel:
        response = trace_stub(channel).Export(encode_spans(make_spans("a", "b", "c")), timeout=5)
    assert (response.partial_success.rejected_spans, response.partial_success.error_message) == (3, "quota")
    # The SDK exporter sees a success (it does not inspect partial_success); the data is still not stored.
    receiver.fail_next(1, "partial_reject")
    assert span_exporter("grpc").export(make_spans("d")) is SpanExportResult.SUCCESS
    assert outcomes(receiver) == ["partial_reject", "partial_reject"]
    assert receiver.spans() == []


def test_partial_reject_http(receiver: OtlpReceiver) -> None:
    receiver.fail_next(1, "partial_reject", message="quota")
    status, _, body = raw_http_post(
        f"{receiver.http_endpoint}/v1/traces",
        encode_spans(make_spans("a", "b")).SerializeToString(),
        {"Content-Type": "application/x-protobuf"},
    )
    response = trace_service_pb2.ExportTraceServiceResponse.FromString(body)
    assert (status, response.partial_success.rejected_spans, response.partial_success.error_message) == (
        200,
        2,
        "quota",
    )
    assert receiver.spans() == []


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_reject_when_rejects_whole_batches_permanently(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory, transport: TransportName
) -> None:
    receiver.reject_when(lambda span: span["name"] == "poison")
    exporter = span_exporter(transport)
    assert exporter.export(make_spans("good", "poison")) is SpanExportResult.FAILURE
    assert exporter.export(make_spans("poison")) is SpanExportResult.FAILURE
    assert exporter.export(make_spans("clean")) is SpanExportResult.SUCCESS
    assert outcomes(receiver) == ["rejected", "rejected", "accepted"]
    assert [span["name"] for span in receiver.spans()] == ["clean"]
    receiver.reset_faults()
    assert exporter.export(make_spans("poison")) is SpanExportResult.SUCCESS


def test_faults_queue_per_signal_then_shared(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory, shutdowns: list[Callable[[], None]]
) -> None:
    metric_exporter = HttpMetricExporter(endpoint=f"{receiver.http_endpoint}/v1/metrics", timeout=5)
    shutdowns.append(metric_exporter.shutdown)
    receiver.fail_next(1, "bad_request", signal="metrics")
    receiver.fail_next(1, "bad_request")  # any signal
    assert receiver.pending_faults("metrics") == 1
    assert receiver.pending_faults() == 2

    spans = span_exporter("http")
    assert spans.export(make_spans("a")) is SpanExportResult.FAILURE  # takes the shared fault
    assert spans.export(make_spans("b")) is SpanExportResult.SUCCESS  # the metrics fault is not for traces
    assert metric_exporter.export(make_metrics()) is MetricExportResult.FAILURE
    assert metric_exporter.export(make_metrics()) is MetricExportResult.SUCCESS
    assert [(r.signal, r.outcome) for r in receiver.request_log()] == [
        ("traces", "bad_request"),
        ("traces", "accepted"),
        ("metrics", "bad_request"),
        ("metrics", "accepted"),
    ]
    assert receiver.pending_faults() == 0


def test_fail_next_rejects_unknown_kind(receiver: OtlpReceiver) -> None:
    with pytest.raises(ValueError, match=r"Expected kind to be one of .* got 'explode'"):
        receiver.fail_next(1, "explode")  # type: ignore[arg-type]


# -- lifecycle and waiting -----------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stop_then_start_again_on_the_same_port(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory, transport: TransportName
) -> None:
    endpoints = (receiver.grpc_endpoint, receiver.http_endpoint)
    # Long-lived like the daemon's exporter: its channel / pooled connection is cut by stop() and recovers.
    steady = span_exporter(transport)
    assert steady.export(make_spans("before")) is SpanExportResult.SUCCESS

    receiver.stop()
    assert not receiver.running
    down = span_exporter(transport, timeout=FAST_FAIL_TIMEOUT_S)
    assert down.export(make_spans("while-down")) is SpanExportResult.FAILURE

    receiver.start()
    assert (receiver.grpc_endpoint, receiver.http_endpoint) == endpoints
    assert steady.export(make_spans("after")) is SpanExportResult.SUCCESS
    assert [span["name"] for span in receiver.spans()] == ["before", "after"]
    assert outcomes(receiver) == ["accepted", "accepted"]


def test_stop_closes_idle_keep_alive_connections_and_threads() -> None:
    before = set(threading.enumerate())
    receiver = OtlpReceiver().start()
    connection = http.client.HTTPConnection("127.0.0.1", receiver.http_port, timeout=5)
    try:
        connection.request(
            "POST",
            "/v1/traces",
            encode_spans(make_spans("a")).SerializeToString(),
            {"Content-Type": "application/x-protobuf"},
        )
        assert (
            connection.getresponse().read() == b""
        )  # empty ExportTraceServiceResponse; connection stays open
        started = time.monotonic()
        receiver.stop()
        assert time.monotonic() - started < 1  # the idle keep-alive handler was woken, not waited out
        receiver.stop()  # a second stop is a no-op
    finally:
        connection.close()
    leftover = [t.name for t in set(threading.enumerate()) - before if t.name.startswith("otlp-receiver")]
    assert leftover == []


def test_wait_for_wakes_when_data_arrives(receiver: OtlpReceiver, span_exporter: SpanExporterFactory) -> None:
    exporter = span_exporter("grpc")
    sender = threading.Thread(target=exporter.export, args=(make_spans("x", "y"),), daemon=True)
    sender.start()
    spans = receiver.wait_for_spans(2, timeout=5)
    sender.join(5)
    assert {span["name"] for span in spans} == {"x", "y"}


def test_wait_for_timeout_explains_what_arrived(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory
) -> None:
    receiver.fail_next(1, "bad_request")
    span_exporter("http").export(make_spans("a"))

    def three_spans(r: OtlpReceiver) -> bool:
        return len(r.spans()) == 3

    with pytest.raises(
        TimeoutError, match=r"three_spans not met within 0.05s: received 0 spans.*http/traces:bad_re"
    ):
        receiver.wait_for(three_spans, timeout=0.05)


def test_clear_forgets_data_but_keeps_faults(
    receiver: OtlpReceiver, span_exporter: SpanExporterFactory
) -> None:
    assert span_exporter("http").export(make_spans("a")) is SpanExportResult.SUCCESS
    receiver.fail_next(2, "unavailable")
    receiver.clear()
    assert (receiver.spans(), receiver.request_log(), receiver.requests["traces"]) == ([], [], 0)
    assert receiver.pending_faults() == 2


# -- decode-free counting ------------------------------------------------------------------------------------


def test_count_items_matches_the_decoded_count() -> None:
    first = encode_spans(make_spans("a", "b", "c"))
    second = encode_spans(make_spans("d", "e"))
    merged = trace_service_pb2.ExportTraceServiceRequest()
    merged.resource_spans.extend([*first.resource_spans, *second.resource_spans])
    assert count_items(merged.SerializeToString()) == 5
    assert count_items(b"") == 0

    logs = logs_service_pb2.ExportLogsServiceRequest()
    scope_logs = logs.resource_logs.add().scope_logs.add()
    for text in ("x", "y"):
        scope_logs.log_records.add().body.string_value = text
    assert count_items(logs.SerializeToString()) == 2

    with pytest.raises(DecodeError):
        count_items(merged.SerializeToString()[:-3])


# -- subprocess mode -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def receiver_process(out: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    """Run ``otlp_receiver.py`` until it prints READY; kill it on the way out if the test did not stop it."""
    command = [
        sys.executable,
        str(RECEIVER_SCRIPT),
        "--grpc-port",
        "0",
        "--http-port",
        "0",
        "--out",
        str(out),
    ]
    with subprocess.Popen([*command, *extra], stdout=subprocess.PIPE, text=True) as process:
        try:
            assert process.stdout is not None
            ready = process.stdout.readline().split()
            assert ready[:1] == ["READY"], f"receiver did not start: {ready!r}"
            ports = dict(field.split("=") for field in ready[1:])
            yield process, int(ports["grpc"]), int(ports["http"])
        finally:
            if process.poll() is None:
                process.kill()


def terminate(process: subprocess.Popen[str]) -> int:
    """SIGTERM, as ``docker compose stop`` sends, and the exit code."""
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=10)


def export_all(grpc_port: int, http_port: int, batches: Sequence[Sequence[ReadableSpan]]) -> None:
    """Alternate batches between the gRPC and HTTP exporters; each export returns once answered."""
    exporters: list[Any] = [
        GrpcSpanExporter(endpoint=f"http://127.0.0.1:{grpc_port}", insecure=True, timeout=5),
        HttpSpanExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/traces", timeout=5),
    ]
    try:
        for index, batch in enumerate(batches):
            assert exporters[index % 2].export(batch) is SpanExportResult.SUCCESS
    finally:
        for exporter in exporters:
            exporter.shutdown()


@pytest.mark.timeout(30)
def test_subprocess_writes_json_lines(tmp_path: Path) -> None:
    out = tmp_path / "received.jsonl"
    with receiver_process(out) as (process, grpc_port, http_port):
        before_ns = time.time_ns()
        export_all(grpc_port, http_port, [make_trace(), make_spans("over-http")])
        logs_exporter: Any = HttpLogExporter(endpoint=f"http://127.0.0.1:{http_port}/v1/logs", timeout=5)
        assert logs_exporter.export(make_logs()[0]) is LogRecordExportResult.SUCCESS
        logs_exporter.shutdown()
        # The receiver flushes before answering, so the lines are on disk now, not eventually.
        lines = [json.loads(line) for line in out.read_text().splitlines()]
        assert terminate(process) == 0

    assert [(line["signal"], line.get("name") or line.get("event_name")) for line in lines] == [
        ("traces", "execute_tool bash"),
        ("traces", "invoke_agent"),
        ("traces", "over-http"),
        ("logs", "copilot_otel.prompt"),
        ("logs", "legacy.event"),
    ]
    child, root = lines[0], lines[1]
    assert child["parent_span_id"] == root["span_id"]
    assert root["attributes"]["tools"] == ["a", "b"]
    assert root["resource"]["service.name"] == "copilot-otel-test"
    assert all(before_ns <= line["received_ns"] <= time.time_ns() for line in lines)


@pytest.mark.timeout(30)
def test_subprocess_count_only(tmp_path: Path) -> None:
    out = tmp_path / "count.json"
    with receiver_process(out, "--count-only", "--interval-s", "60") as (process, grpc_port, http_port):
        assert json.loads(out.read_text())["spans"] == 0  # written once at startup
        export_all(grpc_port, http_port, [make_spans(*"abc"), make_spans(*"defg"), make_trace()])
        # SIGTERM triggers the final write, so the totals are exact without waiting for the next interval.
        assert terminate(process) == 0
    counts = json.loads(out.read_text())
    assert {key: counts[key] for key in ("spans", "metrics", "logs", "requests")} == {
        "spans": 9,
        "metrics": 0,
        "logs": 0,
        "requests": 3,
    }
    assert counts["first_received_ns"] <= counts["last_received_ns"]
