"""The field machinery every source's reader shares: a typed view of one log record's ``data``, declared field by
field, and the notes of what reading it drops.

Each source's reader (:mod:`.copilot.events`, :mod:`.claude_code.reader`, :mod:`.codex.reader`,
:mod:`.gemini.reader`) declares its record types as subclasses of the loop's envelope
(:class:`~copilot_otel.model.inputs.Event`) with fields read by these descriptors::

    class ToolStart(CopilotEvent):
        call_id = text("toolCallId")        # str | None
        arguments = raw("arguments")         # content, as decoded

A field decodes when it is read, not up front: most fields of most lines are never read (a backfill builds one
event per line), and an event is read once, so nothing is cached. Decoding never raises. A log is written by
many CLI versions, so a field of the wrong type counts as absent, the way a missing one does, and the event is
kept:

* :func:`text`: a non-empty ``str``, else ``None`` (an empty string in a log means as little as a missing one);
* :func:`count`: an ``int`` (also from a whole float; JSON writers differ), never a ``bool``, else ``None``;
* :func:`amount`: a number as ``float``, never a ``bool``, else ``None``;
* a count or amount beyond ±2**53 (no real value is; not every encoder carries it) is absent too, and noted as a
  dropped value in the event's :attr:`~copilot_otel.model.inputs.Event.dropped`, which the pipeline returns with
  the line's step and counts with its reason;
* :func:`flag`: ``True`` only for a JSON ``true``;
* a value present but of the wrong type (a number where text belongs, a list where a number does) is noted as
  a ``wrong_shape`` dropped value;
* :func:`raw`: content (prompts, responses, tool arguments and results) passed on as decoded: only the content
  gate (:mod:`copilot_otel.settings.content`) decides what of it may be kept.

It sits beside the source packages, not in the model: it is how a log is read, which the loop never does (the
loop reads the envelope and the protocols of :mod:`copilot_otel.model.inputs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Generic, TypeVar, overload

from ..model.inputs import Dropped, Event
from ..model.records import NUMBER_MAX, DropReason

T = TypeVar("T")

__all__ = [
    "Field",
    "amount",
    "count",
    "flag",
    "json_type",
    "not_read_of",
    "note_not_read",
    "note_version",
    "raw",
    "text",
]


# ---------------------------------------------------------------------------------------------- coercion
def _str(value: Any) -> str | None:
    return value if value.__class__ is str and value else None


# Between a not-read note's kind and the version its record names (a character no kind or version holds).
_VERSION_MARK = "\x1f"


def note_not_read(dropped: Dropped, kind: str, version: object = None) -> None:
    """Note in ``dropped`` that a record of ``kind`` is not read by its reader (``DropReason.NOT_READ``), with the
    CLI version the record itself names, when it names one (Claude Code's do); the pipeline takes the note out of
    the line's dropped values into its counts (:class:`~copilot_otel.model.records.NotRead`). Called only for such a
    record: a record the reader knows costs nothing."""
    detail = f"{kind}{_VERSION_MARK}{version}" if version.__class__ is str and version else kind
    dropped.append((DropReason.NOT_READ, detail))


def note_version(dropped: Dropped, version: object) -> None:
    """Note the CLI version a log names where no session start tells the loop (a Codex sub-agent's rollout): a
    not-read note with no kind, which dates the log's not-read records and is not counted itself."""
    if version.__class__ is str and version:
        dropped.append((DropReason.NOT_READ, f"{_VERSION_MARK}{version}"))


def not_read_of(detail: str) -> tuple[str, str | None]:
    """A not-read note's detail (:func:`note_not_read`) → its kind and the version its record named."""
    kind, _, version = detail.partition(_VERSION_MARK)
    return kind, version or None


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type, with its article, for a message: ``an array``, ``a string``."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "a string" if isinstance(value, str) else "a number"


def _beyond(value: object) -> bool:
    """A number past ±2**53: already noted as ``out_of_range`` by :func:`_int` / :func:`_float`."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not -NUMBER_MAX < value < NUMBER_MAX
    )


def _out_of_range(value: float, dropped: Dropped | None) -> None:
    if dropped is not None:
        dropped.append((DropReason.OUT_OF_RANGE, f"{value!r} is beyond ±2**53"))


def _int(value: Any, dropped: Dropped | None) -> int | None:
    """``value`` as a count (``dropped``: where one out of range is noted; ``None`` when what is read is no
    log line, so there is none to count it against)."""
    # Exact classes, not isinstance: JSON decodes to exactly these, and a bool (an int subclass) is no count.
    cls = value.__class__
    if cls is int:
        if -NUMBER_MAX < value < NUMBER_MAX:
            return value  # type: ignore[no-any-return]
        _out_of_range(value, dropped)
    elif cls is float and value.is_integer():
        if -NUMBER_MAX < value < NUMBER_MAX:
            return int(value)
        _out_of_range(value, dropped)
    return None


def _float(value: Any, dropped: Dropped | None) -> float | None:
    cls = value.__class__
    if cls is not float and cls is not int:  # a bool is neither
        return None
    if -NUMBER_MAX < value < NUMBER_MAX:
        return float(value)
    _out_of_range(value, dropped)
    return None


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------------------------------------- fields
class Field(Generic[T]):
    """One field of an event's ``data``, read as ``kind`` says (``path``: its keys, the outer object's first).

    A descriptor rather than a property per field: the declaration is one line, and reading it costs the same.
    """

    __slots__ = ("inner", "key", "kind")

    def __init__(self, kind: str, path: tuple[str, ...]) -> None:
        self.kind = kind
        self.key = path[0]
        self.inner = path[1] if len(path) > 1 else None

    @overload
    def __get__(self, event: None, owner: type) -> Field[T]: ...
    @overload
    def __get__(self, event: Event, owner: type) -> T: ...
    def __get__(self, event: Event | None, owner: type) -> Any:
        if event is None:
            return self
        value = event.data.get(self.key)
        if self.inner is not None:
            value = value.get(self.inner) if isinstance(value, dict) else None
        kind = self.kind  # interned: each comparison is a pointer check
        if kind is _TEXT:
            if value.__class__ is str:
                return value or None
            if value is not None:
                self._wrong(event, value, "a string")
            return None
        if kind is _RAW:
            return value
        if kind is _FLAG:
            if value is not True and value is not False and value is not None:
                self._wrong(event, value, "a boolean")
            return value is True
        if value.__class__ is int and -NUMBER_MAX < value < NUMBER_MAX:
            # the common number, without a call (not isinstance: a bool is an int); the rest is _int's or _float's
            return value if kind is _COUNT else float(value)
        number = _int(value, event.dropped) if kind is _COUNT else _float(value, event.dropped)
        if number is None and value is not None and not _beyond(value):
            self._wrong(event, value, "a whole number" if kind is _COUNT else "a number")
        return number

    def _wrong(self, event: Event, value: object, wanted: str) -> None:
        """A value of the wrong type: read as absent (the event is kept), noted as a ``wrong_shape`` drop."""
        path = self.key if self.inner is None else f"{self.key}.{self.inner}"
        event.dropped.append(
            (DropReason.WRONG_SHAPE, f"{event.type} {path} is {json_type(value)}, not {wanted}")
        )


_TEXT, _COUNT, _AMOUNT, _FLAG, _RAW = "text", "count", "amount", "flag", "raw"


def text(*path: str) -> Field[str | None]:
    return Field(_TEXT, path)


def count(*path: str) -> Field[int | None]:
    return Field(_COUNT, path)


def amount(*path: str) -> Field[float | None]:
    return Field(_AMOUNT, path)


def flag(*path: str) -> Field[bool]:
    return Field(_FLAG, path)


def raw(*path: str) -> Field[Any]:
    return Field(_RAW, path)
