"""Parse stage: one complete line of ``events.jsonl`` → a typed :class:`~copilot_otel.model.events.Event` or a
:class:`BadLine`.

Never raises: a bad line costs that line only, a bad timestamp only the timestamp. This module frames and decodes
the line and reads the envelope (type, id, timestamp, agent); :mod:`copilot_otel.model.events` reads the payload. Unknown
event types and unknown fields are ignored, so logs from CLI versions we have not seen still work; an unknown type
is noted (``not_read``), so the drift is said once per CLI version (``status``, ``doctor``, the daemon's log).
"""

from __future__ import annotations

from datetime import datetime, timezone

import orjson

from .events import CLASSES, Dropped, Event, json_type, note_not_read
from .records import BadLine, DropReason

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# Timestamps an event may carry: after 1970 and before 2**63 ns (2262-04-11). OTLP's fixed64 would take times up to
# 2554, but a time also goes into the fold's sums (an end is a start plus a duration) and into backends that keep
# int64 nanoseconds. Outside, or unparsable, it is dropped (counted as ``bad_timestamp``) and the event kept.
MAX_TIME_NS = 2**63
# One-entry cache: neighbouring events very often share the timestamp's date-and-hour prefix, but parsing the
# full string is already fast; the cache only saves re-parsing exact duplicates (parallel tool events).
_last_ts: tuple[str, int] = ("", 0)
# The last whole second parsed ("YYYY-MM-DDTHH:MM:SS") and its Unix nanoseconds.
_last_second: tuple[str, int] = ("", 0)
# Nanoseconds per unit of a fraction of n digits.
_FRACTION_SCALE: tuple[int, ...] = (10**9, 10**8, 10**7, 10**6, 10**5, 10**4, 10**3)


def parse_timestamp(value: str) -> int:
    """ISO-8601 (``2026-05-26T16:14:36.213Z`` and offsets) → Unix nanoseconds.

    Raises:
        ValueError: the value is not an ISO-8601 timestamp.
    """
    global _last_ts, _last_second
    if value == _last_ts[0]:
        return _last_ts[1]
    # The CLI's own form (whole seconds, then 1-6 digits of fraction, then Z): events of one second share the
    # expensive part, so only the fraction is read for the second and later ones.
    fraction = value[20:-1]
    if (
        value[19:20] == "."
        and value[-1:] == "Z"
        and 0 < len(fraction) < 7
        and fraction.isdigit()
        and fraction.isascii()
    ):
        prefix = value[:19]
        if prefix == _last_second[0]:
            base = _last_second[1]
        else:
            base = _seconds_ns(prefix + "+00:00")
            _last_second = (prefix, base)
        ns = base + int(fraction) * _FRACTION_SCALE[len(fraction)]
    else:
        text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
        ns = _seconds_ns(text)
    _last_ts = (value, ns)
    return ns


def timestamp_ns(value: object, dropped: Dropped) -> int | None:
    """A timestamp of the log as Unix nanoseconds, or ``None`` (noted in ``dropped`` as a ``bad_timestamp`` value)
    when it is not a string, does not parse, or lies outside what an encoder carries (1970 to 2262)."""
    try:
        ns = parse_timestamp(value) if isinstance(value, str) else -1
    except ValueError:
        ns = -1
    if 0 < ns < MAX_TIME_NS:
        return ns
    dropped.append((DropReason.BAD_TIMESTAMP, repr(value)[:80]))
    return None


def _seconds_ns(text: str) -> int:
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - _EPOCH
    ns: int = (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1_000
    return ns


def _all_null(value: object) -> bool:
    """Every leaf of ``value`` is null (an object or array of nulls, nested); stops at the first real value, which
    in a real log is the first one."""
    if value is None:
        return True
    if value.__class__ is dict:
        return all(_all_null(item) for item in value.values())
    if value.__class__ is list:
        return all(_all_null(item) for item in value)
    return False


# Events the fold reads only to capture their content, which are also the biggest lines of a log (the system
# prompt is 20-50 KB, written once per agent): unless that capture is on (``FoldSettings.undecoded_types``),
# their type is read from the line's prefix and the JSON is not decoded. The CLI writes "type" first; a line
# written otherwise is simply decoded in full.
SKIPPED_TYPES = frozenset({b"system.message", b"assistant.reasoning"})
_TYPE_PREFIX = b'{"type":"'
# Each skip set's line prefixes (``{"type":"system.message"``), built once per set.
_SKIP_PREFIXES: dict[frozenset[bytes], tuple[bytes, ...]] = {}


def undecodable(
    line: bytes, exc: orjson.JSONDecodeError, offset: int, end_offset: int, line_number: int
) -> BadLine:
    """The :class:`BadLine` of a line that is no JSON: not UTF-8, or not JSON (the other sources' readers, in
    :mod:`copilot_otel.sources`, say it the same way)."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return BadLine(DropReason.INVALID_UTF8, offset, end_offset, line_number, "line is not valid UTF-8")
    return BadLine(DropReason.INVALID_JSON, offset, end_offset, line_number, str(exc)[:200])


def parse_line(
    line: bytes,
    offset: int,
    end_offset: int,
    line_number: int,
    skip: frozenset[bytes] = SKIPPED_TYPES,
    dropped: Dropped | None = None,
) -> Event | BadLine | None:
    """Decode one line (without its newline).

    Args:
        line: The raw bytes of the line.
        offset: Byte offset of the line in its file.
        end_offset: Byte offset just past the line's newline.
        line_number: 1-based line number, for the user-facing log message.
        skip: Event types (as bytes) to recognise by their prefix and not decode.
        dropped: Where the values the event loses are noted, as it is parsed and whenever its fields are read
            (the reader's list: the pipeline gives its loop's); by default a list of the event's own.

    Returns:
        The event, a :class:`BadLine`, or ``None`` for a well-framed line of a type in ``skip``.
    """
    prefixes = _SKIP_PREFIXES.get(skip)
    if prefixes is None:
        prefixes = _SKIP_PREFIXES[skip] = tuple(_TYPE_PREFIX + kind + b'"' for kind in skip)
    if line.startswith(prefixes) and line.endswith(b"}"):  # one C call for the common line, of no such type
        return None
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return undecodable(line, exc, offset, end_offset, line_number)
    if not isinstance(obj, dict):
        return BadLine(DropReason.NOT_AN_OBJECT, offset, end_offset, line_number, type(obj).__name__)
    kind = obj.get("type")
    if not isinstance(kind, str) or not kind:
        return BadLine(DropReason.MISSING_FIELD, offset, end_offset, line_number, "no 'type'")
    if dropped is None:
        dropped = []
    ts = obj.get("timestamp")
    # The event itself is good even with a bad time: keep it; the fold dates it at the previous event (0 = unknown).
    time_ns = 0 if ts is None else (timestamp_ns(ts, dropped) or 0)
    event_id = obj.get("id")
    if not isinstance(event_id, str) or not event_id:
        # Ids seed span ids; a line without one gets a stable id from its position in the file.
        event_id = f"offset-{offset}"
    data = obj.get("data")
    cls = CLASSES.get(kind, Event)
    if cls is Event:  # a type the loop does not read: said once per CLI version (the pipeline counts it)
        note_not_read(dropped, kind)
    if data.__class__ is not dict:
        if (
            cls is not Event and data is not None
        ):  # an array, a string, a number: none of its fields can be read
            dropped.append((DropReason.WRONG_SHAPE, f"{kind}: data is {json_type(data)}, not an object"))
        data = {}
    elif cls is not Event and data and _all_null(data):
        dropped.append((DropReason.WRONG_SHAPE, f"{kind}: every value of data is null"))
    agent_id = obj.get("agentId")
    # Positional: a backfill builds one per line (type, id, time_ns, data, agent_id, offset, end_offset, dropped).
    return cls(
        kind,
        event_id,
        time_ns,
        data,
        agent_id if isinstance(agent_id, str) and agent_id else None,
        offset,
        end_offset,
        dropped,
    )
