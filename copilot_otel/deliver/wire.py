"""OTLP protobuf wire encoding of span and log records, written directly as bytes.

Why not build ``opentelemetry-proto`` messages? In a backfill the encoder is the hot path: every attribute would
become a ``KeyValue``/``AnyValue`` message, copied into its ``Span`` and copied again into the request (≈ 33 µs a
span here). Attributes repeat heavily (session id, model, operation names, small counts), so each
``(key, value)`` pair is encoded once to bytes and reused, and a span becomes a handful of ``bytes`` joins
(≈ 8 µs). The output decodes to messages equal to what the protobuf classes produce (tests/test_wire.py checks
it on every fixture); the field numbers are those of ``opentelemetry/proto/{trace,logs,common}/v1/*.proto``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..model.records import LogRecord, Severity, SpanKind, SpanRecord
from ..projections.catalog import EVENT_NAME, UNIQUE_PER_RECORD

_PACK_Q = struct.Struct("<Q").pack
_PACK_D = struct.Struct("<d").pack

# Per field tag (span, log, event and resource attributes use different ones), per key: the key's encoded
# ``KeyValue.key`` field and a value → (value class, whole ``KeyValue`` field) cache. Keyed by value alone, so the
# class is checked on a hit (``1``, ``1.0`` and ``True`` are equal dict keys but encode differently). Bounded
# per key; keys whose values are unique per span or call (``catalog.UNIQUE_PER_RECORD``: ids, hashes) get no value
# cache at all, caching them would only grow it.
_KV_CACHES: dict[int, dict[str, tuple[bytes, dict[Any, tuple[type, bytes]] | None]]] = {}
_VALUES_PER_KEY_MAX = 1_024
# Attribute names are few, but some embed a model name: a flood of new names resets the cache instead.
_KEYS_MAX = 4_096
_MAX_CACHED_KV = 300
_BYTE = [bytes((i,)) for i in range(128)]


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 two's complement, as protobuf writes negative varints
    if value < 0x80:
        return _BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _ld(tag: int, payload: bytes) -> bytes:
    """A length-delimited field; ``tag`` = field number << 3 | 2 (all our fields are < 16: one byte)."""
    return _BYTE[tag] + _varint(len(payload)) + payload


def _any_value(value: Any) -> bytes:
    """``AnyValue``: string 1, bool 2, int 3, double 4, array 5."""
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return b"\x18" + _varint(value)
        return _ld(0x0A, str(value).encode())
    if isinstance(value, float):
        return b"\x21" + _PACK_D(value)
    if isinstance(value, (tuple, list)):
        return _ld(0x2A, b"".join(_ld(0x0A, _any_value(v)) for v in value))
    return _ld(0x0A, str(value).encode("utf-8", "surrogatepass"))


def _value_field(value: Any) -> bytes:
    """``KeyValue.value`` (field 2), with the two most common uncached types (strings, floats) inlined."""
    cls = value.__class__
    if cls is str:
        raw: bytes = value.encode("utf-8", "surrogatepass")
        n = len(raw)
        if n < 126:
            return b"\x12" + _BYTE[n + 2] + b"\x0a" + _BYTE[n] + raw
        return _ld(0x12, _ld(0x0A, raw))
    if cls is float:
        return b"\x12\x09\x21" + _PACK_D(value)
    return _ld(0x12, _any_value(value))


def attributes(attrs: Mapping[str, Any], tag: int) -> bytes:
    """Each attribute as a repeated ``KeyValue`` field ``tag`` (key 1, value 2).

    The hot loop of a backfill (≈ 20 attributes a span): a repeated pair costs two dict lookups and a class
    check; a new one is encoded inline without the generic helpers.
    """
    caches = _KV_CACHES.get(tag)
    if caches is None:
        caches = _KV_CACHES[tag] = {}
    tag_byte = _BYTE[tag]
    out: list[bytes] = []
    append = out.append
    for key, value in attrs.items():
        per_key = caches.get(key)
        if per_key is None:
            raw_key = key.encode("utf-8", "surrogatepass")
            per_key = (_ld(0x0A, raw_key), None if key in UNIQUE_PER_RECORD else {})
            if len(caches) >= _KEYS_MAX:
                caches.clear()
            caches[key] = per_key
        key_field, values = per_key
        if values is not None:
            try:
                hit = values.get(value)
            except TypeError:  # an unhashable value (a list): encoded every time, never cached
                hit = values = None
            if hit is not None and hit[0] is value.__class__:
                append(hit[1])
                continue
        body = key_field + _value_field(value)
        kv = tag_byte + _varint(len(body)) + body
        # Floats (durations, TTFT) almost never repeat, and long strings would make the cache the memory hog.
        if values is not None and value.__class__ is not float and len(kv) < _MAX_CACHED_KV:
            if len(values) >= _VALUES_PER_KEY_MAX:
                values.clear()
            values[value] = (value.__class__, kv)
        append(kv)
    return b"".join(out)


def resource(attrs: Mapping[str, Any]) -> bytes:
    """A ``Resource`` message (attributes 1)."""
    return attributes(attrs, 0x0A)


def scope(name: str, version: str) -> bytes:
    """An ``InstrumentationScope`` message (name 1, version 2)."""
    return _ld(0x0A, name.encode()) + _ld(0x12, version.encode())


# Span names and log event names repeat ("chat gpt-4.1", "execute_tool bash", "turn 3"): their encoded fields too.
_NAMES: dict[tuple[int, str], bytes] = {}
_NAMES_MAX = 4_096
_KINDS = {kind: b"\x30" + _varint(int(kind)) for kind in SpanKind if kind}


# severity_number 2 + severity_text 3
_SEVERITIES = {sev: b"\x10" + _varint(int(sev)) + _ld(0x1A, sev.name.encode()) for sev in Severity}


def _name_field(tag: int, name: str) -> bytes:
    field = _NAMES.get((tag, name))
    if field is None:
        if len(_NAMES) >= _NAMES_MAX:
            _NAMES.clear()
        field = _NAMES[(tag, name)] = _ld(tag, name.encode("utf-8", "surrogatepass"))
    return field


def span(r: SpanRecord) -> bytes:
    """A ``Span``: trace_id 1, span_id 2, parent 4, name 5, kind 6, start 7, end 8, attributes 9, events 11,
    links 13, status 15."""
    parts = [b"\x0a\x10", r.trace_id.to_bytes(16, "big"), b"\x12\x08", r.span_id.to_bytes(8, "big")]
    if r.parent_span_id is not None:
        parts += (b"\x22\x08", r.parent_span_id.to_bytes(8, "big"))
    parts.append(_name_field(0x2A, r.name))
    if r.kind:
        parts.append(_KINDS[r.kind])
    if r.start_ns:
        parts += (b"\x39", _PACK_Q(r.start_ns))
    if r.end_ns:
        parts += (b"\x41", _PACK_Q(r.end_ns))
    parts.append(attributes(r.attributes, 0x4A))
    for ev in r.events:
        # Span.Event: time 1 (fixed64), name 2, attributes 3
        body = (
            (b"\x09" + _PACK_Q(ev.time_ns) if ev.time_ns else b"")
            + _name_field(0x12, ev.name)
            + attributes(ev.attributes, 0x1A)
        )
        parts.append(_ld(0x5A, body))
    for trace_id, span_id in r.links:
        # Span.Link: trace_id 1, span_id 2
        parts.append(
            _ld(0x6A, b"\x0a\x10" + trace_id.to_bytes(16, "big") + b"\x12\x08" + span_id.to_bytes(8, "big"))
        )
    if r.status:
        # Status: message 2, code 3
        status = (
            (_ld(0x12, r.status_message.encode("utf-8", "surrogatepass")) if r.status_message else b"")
            + b"\x18"
            + _varint(int(r.status))
        )
        parts.append(b"\x7a" + _varint(len(status)) + status)
    return b"".join(parts)


def _repeated(tag: bytes, messages: Iterable[bytes]) -> bytes:
    """Messages as one repeated field ``tag``, joined once (no per-message copy)."""
    parts: list[bytes] = []
    for message in messages:
        parts += (tag, _varint(len(message)), message)
    return b"".join(parts)


def export_trace_request(records: Sequence[SpanRecord], resource_bytes: bytes, scope_bytes: bytes) -> bytes:
    """``ExportTraceServiceRequest`` { ResourceSpans 1 { resource 1, ScopeSpans 2 { scope 1, spans 2 } } }."""
    return trace_request(map(span, records), resource_bytes, scope_bytes)


def trace_request(spans: Iterable[bytes], resource_bytes: bytes, scope_bytes: bytes) -> bytes:
    """An ``ExportTraceServiceRequest`` of spans already encoded by :func:`span` (the exporter sizes each one
    before it packs them into requests)."""
    scope_spans = _ld(0x0A, scope_bytes) + _repeated(b"\x12", spans)
    return _ld(0x0A, _ld(0x0A, resource_bytes) + _ld(0x12, scope_spans))


def framed_size(message: bytes) -> int:
    """What one encoded span or log record adds to a request: its tag, its length and itself."""
    return 1 + len(_varint(len(message))) + len(message)


# What a request's two enclosing lengths (ResourceSpans/ResourceLogs and ScopeSpans/ScopeLogs) may grow by
# between an empty request and one of any size below 2**32 bytes: a varint of up to 5 bytes instead of 1, twice.
FRAMING_SLACK = 8


def log_record(r: LogRecord) -> bytes:
    """A ``LogRecord``: time 1, severity_number 2, severity_text 3, body 5, attributes 6, trace_id 9, span_id 10,
    observed_time 11, event_name 12. ``event.name`` is also the last attribute, for backends that predate field
    12."""
    if EVENT_NAME in r.attributes:
        attrs = attributes({**r.attributes, EVENT_NAME: r.event_name}, 0x32)
    else:
        attrs = attributes(r.attributes, 0x32) + attributes({EVENT_NAME: r.event_name}, 0x32)
    time_field = _PACK_Q(r.time_ns)
    parts = [
        b"\x09",
        time_field,
        _SEVERITIES[r.severity],
        _ld(0x2A, _ld(0x0A, r.body.encode("utf-8", "surrogatepass"))),
        attrs,
    ]
    if r.trace_id:
        parts += (b"\x4a\x10", r.trace_id.to_bytes(16, "big"))
    if r.span_id:
        parts += (b"\x52\x08", r.span_id.to_bytes(8, "big"))
    parts += (b"\x59", time_field, _name_field(0x62, r.event_name))
    return b"".join(parts)


def export_logs_request(records: Sequence[LogRecord], resource_bytes: bytes, scope_bytes: bytes) -> bytes:
    """``ExportLogsServiceRequest`` { ResourceLogs 1 { resource 1, ScopeLogs 2 { scope 1, log_records 2 } } }."""
    return logs_request(map(log_record, records), resource_bytes, scope_bytes)


def logs_request(logs: Iterable[bytes], resource_bytes: bytes, scope_bytes: bytes) -> bytes:
    """An ``ExportLogsServiceRequest`` of log records already encoded by :func:`log_record`."""
    scope_logs = _ld(0x0A, scope_bytes) + _repeated(b"\x12", logs)
    return _ld(0x0A, _ld(0x0A, resource_bytes) + _ld(0x12, scope_logs))
