"""The hand-written OTLP wire encoder gives exactly the messages the protobuf classes give, on every fixture."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from copilot_otel import __version__
from copilot_otel.deliver.export import SCOPE_NAME, encode_logs, encode_spans, make_resource
from copilot_otel.model.records import (
    AttrValue,
    LogRecord,
    Severity,
    SpanEventRecord,
    SpanKind,
    SpanRecord,
    StatusCode,
)
from copilot_otel.pipeline import FoldSettings, fold_session
from copilot_otel.sources.sessions import SessionFile
from tests.conftest import all_fixture_logs

RESOURCE = {"service.name": "copilot-otel", "host.name": "h", "service.instance.id": "i", "x.count": 3}


# --- the reference: the same requests built with the generated protobuf classes -------------------------------
def _value(value: Any) -> common_pb2.AnyValue:
    if isinstance(value, bool):
        return common_pb2.AnyValue(bool_value=value)
    if isinstance(value, int):
        return common_pb2.AnyValue(int_value=value)
    if isinstance(value, float):
        return common_pb2.AnyValue(double_value=value)
    if isinstance(value, (tuple, list)):
        return common_pb2.AnyValue(array_value=common_pb2.ArrayValue(values=[_value(v) for v in value]))
    return common_pb2.AnyValue(string_value=value)


def _kvs(attrs: Mapping[str, Any]) -> list[common_pb2.KeyValue]:
    return [common_pb2.KeyValue(key=k, value=_value(v)) for k, v in attrs.items()]


def _scope() -> common_pb2.InstrumentationScope:
    return common_pb2.InstrumentationScope(name=SCOPE_NAME, version=__version__)


def reference_spans(records: Sequence[SpanRecord]) -> trace_service_pb2.ExportTraceServiceRequest:
    request = trace_service_pb2.ExportTraceServiceRequest()
    scope_spans = request.resource_spans.add(
        resource=resource_pb2.Resource(attributes=_kvs(RESOURCE))
    ).scope_spans.add(scope=_scope())
    for r in records:
        span = scope_spans.spans.add(
            trace_id=r.trace_id.to_bytes(16, "big"),
            span_id=r.span_id.to_bytes(8, "big"),
            name=r.name,
            kind=int(r.kind),
            start_time_unix_nano=r.start_ns,
            end_time_unix_nano=r.end_ns,
            attributes=_kvs(r.attributes),
        )
        if r.parent_span_id is not None:
            span.parent_span_id = r.parent_span_id.to_bytes(8, "big")
        if r.status:
            span.status.code = int(r.status)
            if r.status_message:
                span.status.message = r.status_message
        for ev in r.events:
            span.events.append(
                trace_pb2.Span.Event(time_unix_nano=ev.time_ns, name=ev.name, attributes=_kvs(ev.attributes))
            )
        for trace_id, span_id in r.links:
            span.links.append(
                trace_pb2.Span.Link(trace_id=trace_id.to_bytes(16, "big"), span_id=span_id.to_bytes(8, "big"))
            )
    return request


def reference_logs(records: Sequence[LogRecord]) -> logs_service_pb2.ExportLogsServiceRequest:
    request = logs_service_pb2.ExportLogsServiceRequest()
    scope_logs = request.resource_logs.add(
        resource=resource_pb2.Resource(attributes=_kvs(RESOURCE))
    ).scope_logs.add(scope=_scope())
    for r in records:
        log = logs_pb2.LogRecord(
            time_unix_nano=r.time_ns,
            observed_time_unix_nano=r.time_ns,
            severity_number=logs_pb2.SeverityNumber.ValueType(int(r.severity)),
            severity_text=r.severity.name,
            body=common_pb2.AnyValue(string_value=r.body),
            attributes=_kvs({**r.attributes, "event.name": r.event_name}),
            event_name=r.event_name,
        )
        if r.trace_id:
            log.trace_id = r.trace_id.to_bytes(16, "big")
        if r.span_id:
            log.span_id = r.span_id.to_bytes(8, "big")
        scope_logs.log_records.append(log)
    return request


@pytest.mark.parametrize(
    "log", all_fixture_logs(), ids=lambda p: p.parent.name if p.name == "events.jsonl" else p.stem
)
def test_equal_messages_on_every_fixture(log: Any) -> None:
    emissions = fold_session(SessionFile.from_path(log), FoldSettings()).emissions
    spans = [e for e in emissions if isinstance(e, SpanRecord)]
    logs = [e for e in emissions if isinstance(e, LogRecord)]
    resource = make_resource(RESOURCE)
    for _ in range(2):  # the second round is served from the attribute cache
        ours = trace_service_pb2.ExportTraceServiceRequest.FromString(encode_spans(spans, resource))
        assert ours == reference_spans(spans)
        assert logs_service_pb2.ExportLogsServiceRequest.FromString(
            encode_logs(logs, resource)
        ) == reference_logs(logs)


def test_edge_values() -> None:
    attrs: dict[str, AttrValue] = {
        "neg": -5,
        "big": 2**63 - 1,
        "min": -(2**63),
        "f": 1.5,
        "inf": math.inf,
        "t": True,
        "f0": False,
        "zero": 0,
        "list": ("a", "b"),
        "ints": (1, 2),
        "empty": "",
        "utf8": "héllo ✓",
        "long": "x" * 300,
    }
    span = SpanRecord(
        trace_id=2**128 - 1,
        span_id=1,
        parent_span_id=2**64 - 1,
        name="n",
        kind=SpanKind.CLIENT,
        start_ns=0,
        end_ns=2**63,
        attributes=attrs,
        status=StatusCode.ERROR,
        status_message="bad ✗",
        events=(SpanEventRecord("e", 0, {"k": 1}),),
        links=((2**128 - 1, 2**64 - 1), (1, 1)),
    )
    resource = make_resource(RESOURCE)
    assert trace_service_pb2.ExportTraceServiceRequest.FromString(
        encode_spans([span], resource)
    ) == reference_spans([span])
    log = LogRecord("ev", 5, Severity.WARN, "body", {"a": 1.0}, None, None)
    assert logs_service_pb2.ExportLogsServiceRequest.FromString(
        encode_logs([log], resource)
    ) == reference_logs([log])


def _spans_with(attribute_sets: Sequence[Mapping[str, Any]]) -> list[SpanRecord]:
    return [
        SpanRecord(
            trace_id=1,
            span_id=i + 1,
            parent_span_id=None,
            name="n",
            kind=SpanKind.INTERNAL,
            start_ns=1,
            end_ns=2,
            attributes=attrs,
        )
        for i, attrs in enumerate(attribute_sets)
    ]


def _assert_round_trips(spans: list[SpanRecord]) -> None:
    encoded = encode_spans(spans, make_resource(RESOURCE))
    assert trace_service_pb2.ExportTraceServiceRequest.FromString(encoded) == reference_spans(spans)


@pytest.mark.parametrize("order", [(1, True, 1.0, ["l"]), (1.0, 1, ["l"], True), (True, 1.0, 1, ["l"])])
def test_attribute_cache_keeps_each_values_type(order: tuple[Any, ...]) -> None:
    # 1, 1.0 and True are equal dict keys but three different AnyValue types; a list is unhashable. Encoded under
    # one key, in any order and twice (the second time from the cache), each must come out as itself.
    _assert_round_trips(
        _spans_with([{"same.key": value, "s": "y" * (120 + i)} for i, value in enumerate(order * 2)])
    )


def test_attribute_cache_stays_bounded() -> None:
    # Values unique per span (ids are never cached; other keys keep at most _VALUES_PER_KEY_MAX values) and a
    # flood of new attribute names: the cache is reset rather than grown, and the encoding stays right.
    from copilot_otel.deliver import wire

    count = wire._KEYS_MAX + wire._VALUES_PER_KEY_MAX
    _assert_round_trips(
        _spans_with([{f"k{i}": i, "v": f"value-{i}", "gen_ai.response.id": str(i)} for i in range(count)])
    )
    per_tag = wire._KV_CACHES[0x4A]
    assert len(per_tag) <= wire._KEYS_MAX
    assert all(values is None or len(values) <= wire._VALUES_PER_KEY_MAX for _, values in per_tag.values())
    assert per_tag.get("gen_ai.response.id", (b"", None))[1] is None
