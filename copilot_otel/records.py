"""Typed records that flow between the pipeline stages.

``parse`` turns a line into a typed event (:mod:`copilot_otel.events`) or a :class:`BadLine`; the projections
turn activity records into :class:`SpanRecord`, :class:`LogRecord` and :class:`Measurement` values; ``export``
turns those into OTLP. Raw dicts stop at ``parse``.

Records are slotted (created by the hundred thousand during a backfill) and not frozen: a frozen dataclass
sets each field through ``object.__setattr__``, which made building a span cost more than filling in its
attributes. They are never changed once built, which is what makes handing spans and log records to the export
worker's thread safe: treat every record as read-only.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar, dataclass_transform


class RecordBase:
    """What every record shares: a repr and an equality over its fields, written once (see :func:`record`)."""

    __slots__ = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))  # type: ignore[arg-type]
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, RecordBase)
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq is


_T = TypeVar("_T")


@dataclass_transform()
def record(cls: type[_T]) -> type[_T]:
    """A slotted dataclass of which only ``__init__`` is generated; repr and eq come from :class:`RecordBase`.

    The package declares some sixty record classes, all imported by every command: a generated ``__repr__`` and
    ``__eq__`` per class were a third of their start-up cost.
    """
    return dataclass(slots=True, repr=False, eq=False)(cls)


AttrValue = str | bool | int | float | tuple[str, ...] | tuple[int, ...] | tuple[float, ...]
Attributes = Mapping[str, AttrValue]


class DropReason(str, enum.Enum):
    """Why a line was skipped; each reason is a counter label and a log line."""

    INVALID_JSON = "invalid_json"
    INVALID_UTF8 = "invalid_utf8"
    NOT_AN_OBJECT = "not_an_object"
    MISSING_FIELD = "missing_field"
    BAD_TIMESTAMP = "bad_timestamp"
    OUT_OF_RANGE = "out_of_range"
    END_BEFORE_START = "end_before_start"
    TOO_LONG = "too_long"


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that could not be turned into an event; counted and skipped, never fatal."""

    reason: DropReason
    offset: int
    end_offset: int
    line_number: int
    detail: str = ""


class SpanKind(enum.IntEnum):
    """The two OTel span kinds we emit (values match the OTLP enum)."""

    INTERNAL = 1
    CLIENT = 3


class StatusCode(enum.IntEnum):
    """OTel status codes (values match the OTLP enum)."""

    UNSET = 0
    OK = 1
    ERROR = 2


@record
class SpanEventRecord(RecordBase):
    """A span event (OTel "event" attached to a span), e.g. an abort or a steering message."""

    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@record
class SpanRecord(RecordBase):
    """A finished span, ready for export.

    Ids are integers (128-bit trace, 64-bit span) derived deterministically by :mod:`copilot_otel.ids`.
    ``source_offset`` is the end offset of the line whose reading completed this span: the daemon uses
    it to know which checkpoint an acknowledged span allows.
    """

    trace_id: int
    span_id: int
    parent_span_id: int | None
    name: str
    kind: SpanKind
    start_ns: int
    end_ns: int
    attributes: Attributes
    status: StatusCode = StatusCode.UNSET
    status_message: str | None = None
    events: tuple[SpanEventRecord, ...] = ()
    source_offset: int = 0


class Severity(enum.IntEnum):
    """OTel log severity numbers for the levels we use."""

    INFO = 9
    WARN = 13
    ERROR = 17


@record
class LogRecord(RecordBase):
    """An OTel log event (``event.name`` + attributes), correlated with a trace and span."""

    event_name: str
    time_ns: int
    severity: Severity
    body: str
    attributes: Attributes
    trace_id: int | None = None
    span_id: int | None = None
    source_offset: int = 0


class Instrument(str, enum.Enum):
    """How a :class:`Measurement` is recorded."""

    COUNTER = "counter"
    HISTOGRAM = "histogram"


@record
class Measurement(RecordBase):
    """One metric data point produced by the fold (the exporter owns the instruments)."""

    name: str
    value: float
    attributes: Attributes
    instrument: Instrument = Instrument.COUNTER
    source_offset: int = 0


Emission = SpanRecord | LogRecord | Measurement
