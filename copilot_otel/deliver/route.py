"""The back half of the pipeline, once: a :class:`~copilot_otel.pipeline.Step` → what to send, what to record, and
the pipeline's own health.

``replay`` and the daemon both take each step of a session's :class:`~copilot_otel.pipeline.Pipeline` and must do
the same with it: spans to the exporter, log events too unless logs are off, metric points to their aggregation
unless no encoder could carry the value, a bad line or a dropped value counted by reason, logged (rate-limited)
and added to the self-health metrics. :class:`Router` is that, and :class:`Health` the counts it keeps, so the
two drivers cannot drift apart (they had: each named the health metrics in string literals of its own).

What the drivers keep: *where* records go (replay batches them to a sending thread, the daemon to its outbox with
a checkpoint marker) and what a record means for them beyond the pipeline (the daemon acts on detections).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from ..common.ratelimit import RateLimitedLog
from ..model.records import BadLine, DropReason, Emission, LogRecord, Measurement, NotRead, SpanRecord
from ..projections.catalog import DROP_REASON, LINES_DROPPED, LINES_READ, VALUES_DROPPED
from ..settings.roots import not_read_line
from .export import measurement_encodable

__all__ = ["DropLog", "Health", "MetricSink", "RateLimitedDrops", "Router"]

logger = logging.getLogger(__name__)

# A line's detail (its JSON error) is cut to this in the log: enough to find it, never a whole tool output.
_DETAIL_CHARS = 200


class MetricSink(Protocol):
    """Where metric points and health counts go: the daemon's SDK meters or replay's aggregator."""

    def record(self, measurement: Measurement) -> None: ...

    def count(self, name: str, value: float = 1, attributes: Mapping[str, Any] | None = None) -> None: ...


class DropLog(Protocol):
    """How a driver says a drop: the daemon rate-limits by reason over time (it runs for months), replay says the
    first few with their line numbers and keeps them for its summary (it ends)."""

    def line(self, source: str, bad: BadLine) -> None: ...

    def value(self, source: str, value: BadLine) -> None: ...

    def measurement(self, source: str, record: Measurement) -> None: ...


@dataclass
class Health:
    """The pipeline's own health, counted the same way by every driver (``status``, replay's summary)."""

    lines_read: int = 0
    logs: int = 0  # log events routed to be sent
    lines_dropped: dict[str, int] = field(default_factory=dict)
    # Values dropped from events that were kept (a timestamp past 2262, a count beyond 2**53), by reason.
    values_dropped: dict[str, int] = field(default_factory=dict)
    # Metric points recorded, and those whose value no encoder carries (a poison 2**70 would stay in a cumulative
    # counter forever).
    measurements: int = 0
    measurements_dropped: int = 0
    # Records of kinds their reader does not read (drift), per (agent, CLI version): records by kind.
    not_read: dict[tuple[str, str | None], dict[str, int]] = field(default_factory=dict)


class Router:
    """Route one session's steps: records to send into the caller's lists, points to ``metrics``, drops counted.

    Args:
        metrics: Where metric points and health counts go (``None``: metrics are off, points are not kept).
        logs_enabled: Whether log events are sent (``COPILOT_OTEL_LOGS``).
        say: How drops are said (:class:`RateLimitedDrops` for the daemon).
        health: The counts (shared by the routers of one run).
    """

    __slots__ = ("_say", "health", "logs_enabled", "metrics")

    def __init__(
        self,
        metrics: MetricSink | None,
        *,
        logs_enabled: bool,
        say: DropLog,
        health: Health | None = None,
    ) -> None:
        self.metrics = metrics
        self.logs_enabled = logs_enabled
        self._say = say
        self.health = health if health is not None else Health()

    def route(
        self,
        emissions: Sequence[Emission],
        values_dropped: Sequence[BadLine],
        source: str,
        spans: list[Any],
        logs: list[Any],
        after: int = -1,
    ) -> int:
        """Put a step's spans in ``spans`` and log events in ``logs`` (one list may be both); returns spans added.

        ``after``: emissions and dropped values caused by lines ending at or before this offset are skipped (the
        daemon re-reads them after a restart only to rebuild the fold; they were delivered before).
        """
        for value in values_dropped:
            if value.end_offset > after:  # a line *ending* past it, as for emissions
                self.dropped_value(source, value)
        added = 0
        metrics = self.metrics
        for record in emissions:
            if record.source_offset <= after:
                continue
            # type() is, not isinstance: the three record classes are final, and this runs per record
            kind = type(record)
            if kind is SpanRecord:
                spans.append(record)
                added += 1
            elif kind is LogRecord:
                if self.logs_enabled:
                    logs.append(record)
                    self.health.logs += 1
            elif metrics is not None:
                measurement = cast(Measurement, record)
                self.health.measurements += 1
                if measurement_encodable(measurement.value):
                    metrics.record(measurement)
                else:
                    self.health.measurements_dropped += 1
                    self._say.measurement(source, measurement)
        return added

    def read(self, lines: int) -> None:
        """Lines with data, bad ones excepted: the count replay and the daemon report for the same log."""
        self.health.lines_read += lines
        if self.metrics is not None and lines:
            self.metrics.count(LINES_READ, lines)

    def dropped_line(self, source: str, bad: BadLine) -> None:
        """A line that could not be read as an event: counted by reason, said."""
        reason = bad.reason.value
        _add(self.health.lines_dropped, reason)
        if self.metrics is not None:
            self.metrics.count(LINES_DROPPED, 1, {DROP_REASON: reason})
        self._say.line(source, bad)

    def not_read(self, source: str, notes: Sequence[NotRead]) -> None:
        """Records of kinds their reader does not read (:meth:`Pipeline.take_not_read
        <copilot_otel.pipeline.Pipeline.take_not_read>`): counted per agent, CLI version and kind, as dropped values
        of reason ``not_read``, and said in one INFO line per CLI version per run (another only when a kind that
        version had not shown appears), never per record.

        INFO, not WARNING: a CLI newer than its reader is expected on every release, nothing the user set is
        wrong and nothing they can mend, and what was read is exported as before; the line, ``status`` and
        ``doctor`` say what is not read, so it is never silent.
        """
        seen = self.health.not_read
        new: dict[tuple[str, str | None], list[str]] = {}
        for note in notes:
            key = (note.agent, note.cli_version)
            kinds = seen.setdefault(key, {})
            if note.kind not in kinds:
                new.setdefault(key, []).append(note.kind)
            kinds[note.kind] = kinds.get(note.kind, 0) + note.records
            if self.metrics is not None:  # the agent and version are in status and the log, not in the series
                self.metrics.count(VALUES_DROPPED, note.records, {DROP_REASON: DropReason.NOT_READ.value})
        for (agent, version), fresh in new.items():
            known = seen[agent, version]
            if len(fresh) == len(known):
                logger.info("%s (first in %s)", not_read_line(agent, version, known), source)
            else:
                logger.info(
                    "%s (in %s; %d in all for this version)",
                    not_read_line(agent, version, fresh, more=True),
                    source,
                    len(known),
                )

    def dropped_value(self, source: str, value: BadLine) -> None:
        """A value of a kept event was dropped (a timestamp past 2262, a count beyond 2**53)."""
        reason = value.reason.value
        _add(self.health.values_dropped, reason)
        if self.metrics is not None:
            self.metrics.count(VALUES_DROPPED, 1, {DROP_REASON: reason})
        self._say.value(source, value)


class RateLimitedDrops:
    """The daemon's way of saying drops: one line per reason per interval (:class:`RateLimitedLog`)."""

    def __init__(self, log: RateLimitedLog) -> None:
        self._log = log

    def line(self, source: str, bad: BadLine) -> None:
        reason = bad.reason.value
        self._log.warning(
            f"drop:{reason}",
            "skipped a bad line in %s at byte %d (%s: %s)",
            source,
            bad.offset,
            reason,
            bad.detail[:_DETAIL_CHARS],
        )

    def value(self, source: str, value: BadLine) -> None:
        reason = value.reason.value
        self._log.warning(
            f"value:{reason}",
            "dropped a value in %s at byte %d (%s: %s); the rest of the event is kept",
            source,
            value.offset,
            reason,
            value.detail,
        )

    def measurement(self, source: str, record: Measurement) -> None:
        self._log.warning(
            "drop:measurement",
            "dropped a %s measurement of %s whose value cannot be encoded (%s)",
            record.name,
            source,
            record.value,
        )


def _add(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1
