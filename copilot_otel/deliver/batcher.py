"""The one batcher: how the daemon's outbox and replay cut records into batches, and a batch into export requests.

An export request holds at most :data:`BATCH_RECORDS` records and :attr:`Packer.max_request_bytes` bytes (its
protobuf bytes before compression: ``COPILOT_OTEL_MAX_REQUEST_BYTES``, 4 MiB by default as collectors take,
lowered for the rest of the run by a collector that answers that a request was too large). This module is the one
place that applies both limits, for both paths:

* the daemon's outbox hands the sender at most :data:`BATCH_RECORDS` records at a time, taken in file order from
  a lane with the markers among them (:func:`take`), so a checkpoint follows the requests that carried its lines;
* replay gathers a :class:`Batch` while it folds and hands it to its sending thread once it is :attr:`Batch.full`;
* the sender encodes a batch's records and :meth:`Packer.pack` cuts each signal's records into requests under
  both limits; a record too large for any request alone has its captured content cut (:meth:`Packer.shrink`).

One count for all three: the daemon and replay used to hand over 512 and 2,048 records and the requests held 512,
so replay's batches became four requests each while the daemon's were one; now a batch of one signal is one
request, and the batches of a replay and of the daemon are cut the same way.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..common.ratelimit import RateLimitedLog
from ..model.records import LogRecord, SpanRecord, replace
from ..projections.catalog import CONVERSATION
from ..settings.content import shrink
from . import wire

# Records per batch and per export request at most: the OpenTelemetry SDK's default export batch size
# (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, which is not read: a request is capped in bytes too, which that setting is not).
BATCH_RECORDS = 512
# A cap learned from a 413 (which does not say the limit: each halves the request) never goes below this.
MIN_REQUEST_BYTES = 64 * 1024
# To fit a record into one request, string values longer than this are cut (captured content); shorter ones are
# names, ids, models and counts, and are kept whole.
_SHRINK_FLOOR_CHARS = 256
# Room for each cut value's "…[truncated N chars]" marker, and how many rounds of cutting (multi-byte text, JSON
# kept valid) before a record is sent as it is.
_MARKER_BYTES = 32
_SHRINK_ROUNDS = 6
# What a record's framing adds to its bytes in a request at most: its tag and a length of up to 5 bytes.
_FRAMED_MAX = 6

# A record and its encoded bytes, as packed into requests.
Part = tuple[Any, bytes]
_MESSAGE = operator.itemgetter(1)
# What travels with the records of a lane without being sent (the outbox's markers).
M = TypeVar("M")


@dataclass(slots=True)
class Batch:
    """Records handed to the sender at once: its spans, then its log records (each signal has its own requests).

    Attributes:
        spans: The spans, in the order they were made.
        logs: The log records, in the order they were made.
    """

    spans: list[SpanRecord] = field(default_factory=list)
    logs: list[LogRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.spans) + len(self.logs)

    @property
    def full(self) -> bool:
        """It holds :data:`BATCH_RECORDS` records: time to hand it over (replay's fold loop asks after each line)."""
        return len(self.spans) + len(self.logs) >= BATCH_RECORDS


def take(items: deque[SpanRecord | LogRecord | M]) -> tuple[Batch, list[M]]:
    """The batch at the head of a lane: its first :data:`BATCH_RECORDS` records, with the marks among them and
    those right after them (they need no more records), all removed from ``items``."""
    batch = Batch()
    marks: list[M] = []
    taken = 0
    while items and taken < BATCH_RECORDS:
        item = items.popleft()
        if isinstance(item, SpanRecord):
            batch.spans.append(item)
            taken += 1
        elif isinstance(item, LogRecord):
            batch.logs.append(item)
            taken += 1
        else:
            marks.append(item)
    while items and not isinstance(items[0], (SpanRecord, LogRecord)):
        marks.append(items.popleft())  # type: ignore[arg-type]
    return batch, marks


class Packer:
    """Cuts one signal's encoded records into requests under both limits, and keeps the byte cap.

    The sender owns the encoding (which signal, which request framing); this class only sizes: so the limits are
    applied in one place whether the records came from the outbox or from replay, and the cap a collector taught
    us holds for both.

    Args:
        max_request_bytes: The largest request, as configured (:attr:`Config.max_request_bytes`).
        log: Where the repeated warnings go, rate-limited (the sender's).
        on_cut: Called once for each record whose captured content was cut (the sender counts it).
    """

    def __init__(self, max_request_bytes: int, log: RateLimitedLog, on_cut: Callable[[], None]) -> None:
        #: The largest request, as configured; lowered when the collector says a smaller one is its limit.
        self.max_request_bytes = max_request_bytes
        self._log = log
        self._on_cut = on_cut
        self._said = False
        # The records this delivery cut (by identity: records are not hashable), so a record cut again is one.
        self._cut: set[int] = set()

    def pack(self, parts: Sequence[Part], framing: int, one: Callable[[Any], bytes]) -> Iterable[list[Part]]:
        """``parts`` in order, in requests of at most :data:`BATCH_RECORDS` records and :attr:`max_request_bytes`
        bytes (``framing``: what a request adds around its records); a record too large for any request alone has
        its content cut first (``one`` encodes it again)."""
        room = self.max_request_bytes - framing
        start = 0
        while start < len(parts):  # whole batches that fit, the usual case, without sizing each record
            chunk = list(parts[start : start + BATCH_RECORDS])
            if sum(map(len, map(_MESSAGE, chunk))) + _FRAMED_MAX * len(chunk) > room:
                break
            yield chunk
            start += len(chunk)
        batch: list[Part] = []
        size = 0
        for part in parts[start:]:
            n = wire.framed_size(part[1])
            if n > room:
                part = self.shrink(part, room, one)
                n = wire.framed_size(part[1])
            if batch and (size + n > room or len(batch) >= BATCH_RECORDS):
                yield batch
                batch, size = [], 0
            batch.append(part)
            size += n
        if batch:
            yield batch

    def lower(self, size: int, limit: int | None, message: str) -> int:
        """A collector refused a ``size``-byte request as too large (saying its ``limit``, or not): the cap for the
        rest of the run, never below :data:`MIN_REQUEST_BYTES` (each unsaid limit halves the request)."""
        cap = limit if limit else size // 2
        cap = max(MIN_REQUEST_BYTES, min(cap, self.max_request_bytes))
        if cap < self.max_request_bytes:
            self.max_request_bytes = cap
            self._log.warning(
                "too-large",
                "the collector refused a %s-byte request as too large (%s); requests are kept under %s bytes "
                "from now on (COPILOT_OTEL_MAX_REQUEST_BYTES)",
                f"{size:,}",
                message,
                f"{cap:,}",
            )
        return cap

    def shrink(self, part: Part, room: int, one: Callable[[Any], bytes]) -> Part:
        """``part`` with its captured content cut until it fits in ``room`` bytes, or as small as that makes it.

        Captured content (prompts, answers, tool arguments and results, in every vocabulary's attribute) is what
        makes a record large; names, ids and counts are short. So every string value longer than
        :data:`_SHRINK_FLOOR_CHARS` is cut by the same share, with the truncation marker, until the record fits.
        Said once per run (a WARNING), counted by ``on_cut`` (the ``copilot_otel.export.shrunk`` counter).
        """
        record, body = part
        for _ in range(_SHRINK_ROUNDS):
            over = wire.framed_size(body) - room
            long = [len(value.encode("utf-8", "surrogatepass")) for value in _long_strings(record)]
            if over <= 0 or not long:
                break
            share = max(0.0, 1 - (over + _MARKER_BYTES * len(long)) / sum(long))
            smaller = _cut_strings(record, share)
            if smaller == record:
                break
            record, body = smaller, one(smaller)
        if record is part[0]:
            return part
        if id(part[0]) not in self._cut:  # a record cut again (a lower cap) is counted once
            self._on_cut()
        self._cut.add(id(record))
        if not self._said:
            self._said = True
            self._log.logger.warning(
                "%s was %s bytes, more than one export request may carry (%s bytes, COPILOT_OTEL_MAX_REQUEST_BYTES "
                "or the collector's limit): its captured content was cut to %s bytes, marked "
                "'…[truncated N chars]' (said once; every record so cut is counted in copilot_otel.export.shrunk)",
                describe(part[0]),
                f"{len(part[1]):,}",
                f"{room:,}",
                f"{len(body):,}",
            )
        return record, body

    def done(self) -> None:
        """The delivery is over: its records are let go (their identities may be reused)."""
        self._cut.clear()


def describe(record: Any) -> str:
    """Where a record came from, for a log line: its name and session."""
    name = getattr(record, "name", None) or getattr(record, "event_name", "?")
    session = record.attributes.get(CONVERSATION, "?")
    return (
        f"{name!r} of session {session}, from the line ending at byte {getattr(record, 'source_offset', '?')}"
    )


def _long_strings(record: Any) -> list[str]:
    """A record's string values long enough to be captured content (see :data:`_SHRINK_FLOOR_CHARS`)."""
    values: list[Any] = list(record.attributes.values())
    if isinstance(record, SpanRecord):
        for event in record.events:
            values += event.attributes.values()
    else:
        values.append(record.body)
    return [v for v in values if isinstance(v, str) and len(v) > _SHRINK_FLOOR_CHARS]


def _cut_strings(record: Any, share: float) -> Any:
    """``record`` with each long string value cut to ``share`` of its length (never below the floor), marked."""

    def cut(value: Any) -> Any:
        if not isinstance(value, str) or len(value) <= _SHRINK_FLOOR_CHARS:
            return value
        return shrink(value, max(_SHRINK_FLOOR_CHARS, int(len(value) * share)))

    def attributes(attrs: Mapping[str, Any]) -> dict[str, Any]:
        return {key: cut(value) for key, value in attrs.items()}

    if isinstance(record, SpanRecord):
        events = tuple(replace(event, attributes=attributes(event.attributes)) for event in record.events)
        return replace(record, attributes=attributes(record.attributes), events=events)
    return replace(record, body=cut(record.body), attributes=attributes(record.attributes))
