"""Copilot CLI's parse stage: one complete line of ``events.jsonl`` → a typed event of :mod:`.events` or a
:class:`~copilot_otel.model.records.BadLine`.

Never raises: a bad line costs that line only, a bad timestamp only the timestamp. This module frames and decodes
the line and reads the envelope (type, id, timestamp, agent); :mod:`.events` reads the payload. Unknown event
types and unknown fields are ignored, so logs from CLI versions we have not seen still work; an unknown type is
noted (``not_read``), so the drift is said once per CLI version (``status``, ``doctor``, the daemon's log).
"""

from __future__ import annotations

import orjson

from ...model.inputs import Dropped
from ...model.records import BadLine, DropReason
from ...model.timestamps import timestamp_ns
from .. import undecodable
from ..fields import json_type, note_not_read
from .events import CLASSES, CopilotEvent


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


def parse_line(
    line: bytes,
    offset: int,
    end_offset: int,
    line_number: int,
    skip: frozenset[bytes] = SKIPPED_TYPES,
    dropped: Dropped | None = None,
) -> CopilotEvent | BadLine | None:
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
    # The check sources.decode makes (and time_of below), written out, not called: the calls cost 100-250 ns a
    # line, 2-5 % of this stage's CPU over a 20,000-event history (alternating runs); keep the two alike.
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
    cls = CLASSES.get(kind, CopilotEvent)
    if (
        cls is CopilotEvent
    ):  # a type the loop does not read: said once per CLI version (the pipeline counts it)
        note_not_read(dropped, kind)
    if data.__class__ is not dict:
        if (
            cls is not CopilotEvent and data is not None
        ):  # an array, a string, a number: none of its fields can be read
            dropped.append((DropReason.WRONG_SHAPE, f"{kind}: data is {json_type(data)}, not an object"))
        data = {}
    elif cls is not CopilotEvent and data and _all_null(data):
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
