"""Typed records that flow between the pipeline stages.

``parse`` turns a line into a typed event (:mod:`copilot_otel.sources.copilot.events`) or a :class:`BadLine`; the projections
turn activity records into :class:`SpanRecord`, :class:`LogRecord` and :class:`Measurement` values; ``export``
turns those into OTLP. Raw dicts stop at ``parse``.

Records are slotted (created by the hundred thousand during a backfill) and not frozen: a frozen dataclass
sets each field through ``object.__setattr__``, which made building a span cost more than filling in its
attributes. They are never changed once built, which is what makes handing spans and log records to the export
worker's thread safe: treat every record as read-only.
"""

from __future__ import annotations

import enum
import inspect
import sys
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field
from typing import Any, TypeVar

if sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10 (Ubuntu 22.04's): the same decorator, from the backport (pyproject installs it there)
    from typing_extensions import dataclass_transform


class RecordBase:
    """What every record shares: a repr and an equality over its fields, written once (see :func:`record`)."""

    __slots__ = ()
    # (name, default, default factory) of every field, the bases' first; set by :func:`record`
    __record_fields__: tuple[tuple[str, Any, Any], ...] = ()
    __match_args__: tuple[str, ...] = ()  # their names (for ``match`` too, as a dataclass has them)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name, _, _ in self.__record_fields__)

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name, _, _ in self.__record_fields__)
        return f"{type(self).__name__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, RecordBase)
        return self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq is


_T = TypeVar("_T")
_R = TypeVar("_R", bound=RecordBase)


def field_names(cls: type[RecordBase] | RecordBase) -> tuple[str, ...]:
    """The names of a record's fields, in declaration order (the bases' first)."""
    return cls.__match_args__


def replace(obj: _R, **changes: Any) -> _R:
    """A copy of the record ``obj`` with ``changes`` applied (``dataclasses.replace`` for :func:`record`)."""
    values = {name: getattr(obj, name) for name, _, _ in obj.__record_fields__}
    values.update(changes)
    return type(obj)(**values)


_NO_DEFAULT: Any = MISSING


@dataclass_transform(field_specifiers=(field,))
def record(cls: type[_T]) -> type[_T]:
    """A slotted class with a generated ``__init__``, declared like a dataclass; repr and eq from :class:`RecordBase`.

    Why not ``dataclass(slots=True)``: the package declares some ninety record classes and every command imports
    them; on CPython 3.11 a dataclass costs about 0.7 ms to create (field objects, a second class for the slots,
    an ``__init__`` compiled with its checks), so records alone were a fifth of the start-up of a one-session
    replay. This builds the same ``__init__`` (positional or keyword arguments, defaults,
    ``field(default_factory=...)``) and the slotted class, and nothing else: no ``__post_init__``, no
    ``init=False``, no ``kw_only``, no ``ClassVar`` fields (none are used; an annotation of that kind fails here,
    loudly). Fields are listed in ``__record_fields__``; :func:`field_names` and :func:`replace` read them.
    """
    inherited: tuple[tuple[str, Any, Any], ...] = getattr(cls, "__record_fields__", ())
    own: list[tuple[str, Any, Any]] = []
    for name, annotation in inspect.get_annotations(cls).items():
        if "ClassVar" in str(annotation) or "InitVar" in str(annotation):
            raise TypeError(f"{cls.__name__}.{name}: record fields cannot be {annotation}")
        value = cls.__dict__.get(name, _NO_DEFAULT)
        if isinstance(value, Field):
            if value.init is False or value.kw_only is True:
                raise TypeError(f"{cls.__name__}.{name}: record fields are init fields, positional or not")
            own.append((name, value.default, value.default_factory))
        else:
            own.append((name, value, _NO_DEFAULT))
    every = inherited + tuple(own)
    params, body = [], []
    scope: dict[str, Any] = {"_NO_DEFAULT": _NO_DEFAULT}
    for name, default, factory in every:
        if factory is not _NO_DEFAULT:
            scope[f"_f_{name}"] = factory
            params.append(f"{name}=_NO_DEFAULT")
            body.append(f"self.{name} = _f_{name}() if {name} is _NO_DEFAULT else {name}")
        elif default is not _NO_DEFAULT:
            scope[f"_d_{name}"] = default
            params.append(f"{name}=_d_{name}")
            body.append(f"self.{name} = {name}")
        else:
            params.append(name)
            body.append(f"self.{name} = {name}")
    source = f"def __init__(self, {', '.join(params)}):\n    " + ("\n    ".join(body) or "pass")
    exec(source, scope)  # the source is built from the class's own field names, as dataclasses does
    init = scope["__init__"]
    namespace = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    for name, _, _ in own:
        namespace.pop(name, None)
    namespace["__slots__"] = tuple(name for name, _, _ in own)
    namespace["__record_fields__"] = every
    namespace["__match_args__"] = tuple(name for name, _, _ in every)
    namespace["__init__"] = init
    metaclass: Any = type(cls)
    made: type[_T] = metaclass(cls.__name__, cls.__bases__, namespace)
    made.__qualname__ = cls.__qualname__
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return made


AttrValue = str | bool | int | float | tuple[str, ...] | tuple[int, ...] | tuple[float, ...]
Attributes = Mapping[str, AttrValue]


# A number at or beyond this in magnitude is no real count, amount or duration: floats stop being exact integers
# there, OTLP ints are int64, and a cumulative counter would carry it forever (orjson reads an integer beyond u64
# as a float: 2**70 is 1.18e21). Events read such a value as absent; a measurement of it is not recorded.
NUMBER_MAX = 2**53


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
    UNTERMINATED = "unterminated"
    """The last line of a log that was deleted or replaced never got its newline (the daemon; replay folds it)."""
    WRONG_SHAPE = "wrong_shape"
    """Valid JSON its event's type cannot be read from (``data`` an array, only nulls, a field of the wrong type):
    the line is kept and routed but what it says is lost, so it is a dropped value, not a dropped line."""
    NOT_READ = "not_read"
    """A record of a kind its reader does not read (a CLI version newer than the reader): kept for its time, what
    it says is lost. Noted by the reader (detail: :func:`~copilot_otel.sources.fields.note_not_read`), taken by the
    pipeline into :class:`NotRead` counts instead of the line's dropped values: said once per CLI version, not
    per line."""


@dataclass(frozen=True, slots=True)
class NotRead:
    """Records of one kind that an agent's reader does not read, in logs of one CLI version (drift: the CLI writes
    something new). The pipeline counts them per log; ``status``, ``doctor`` and the daemon's log sum them per
    agent and version.

    Attributes:
        agent: The agent that wrote them (``copilot``, ``claude-code``, ``codex``, ``gemini``).
        cli_version: The CLI version the log names (``None``: it names none, as Gemini CLI's never does).
        kind: The record kind as the reader names kinds (Claude Code ``cost-state``, ``system.api_error``; Codex
            ``event_msg.thread_settings_applied``; Copilot ``subagent.configured``).
        records: How many records of it.
    """

    agent: str
    cli_version: str | None
    kind: str
    records: int


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

    Ids are integers (128-bit trace, 64-bit span) derived deterministically by :mod:`copilot_otel.model.ids`.
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
    # Spans of other traces this one continues (a forked session's first prompt: its parent's prompt), as
    # (trace id, span id) pairs: OTLP span links.
    links: tuple[tuple[int, int], ...] = ()


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
