"""A time window over prompts: ``replay --since/--until`` and ``run --backfill DATE`` select by the events' time.

A prompt is in the window when it *started* in it (``since <= start < until``), and then all of it is in: its
spans, log events and metric points, even the parts that happened after ``until``. What belongs to no prompt
(a session's start, resume and shutdown) is in when it happened in the window. Times are the events' own
(``timestamp`` in the log), never a file's modification time: a copied or touched old log is not new.

The window is a stage between the agent loop and the projections (:class:`~copilot_otel.pipeline.Pipeline`
applies it), so the loop stays pure and unaware of it, and whatever the pipeline emits is already selected.
A prompt is known by its :class:`~copilot_otel.activity.PromptStarted` record (a human prompt's first moment);
a prompt without one (activity with no user message before it) is placed by the first record it completes.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

from .activity import PromptRun, PromptStarted, Record
from .errors import ConfigError

__all__ = ["PromptWindow", "parse_moment"]

_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_EXPECTED = (
    "Expected an ISO date or datetime (2026-01-01, 2026-01-01T09:00, 2026-01-01T09:00:00+01:00), a time "
    "ago (30m, 12h, 7d, 2w), today or yesterday"
)


def parse_moment(text: str, *, end: bool = False, now_ns: int | None = None) -> int:
    """A ``--since`` (``end=False``) or ``--until`` (``end=True``) bound in Unix nanoseconds.

    A date alone means its whole day in the local zone: ``--since`` from its first moment, ``--until`` up to
    and including it. A datetime without an offset is local time. ``7d`` is seven days before now.

    Raises:
        ConfigError: The text is none of these forms.
    """
    now_ns = time.time_ns() if now_ns is None else now_ns
    value = text.strip()
    match = _RELATIVE.match(value.lower())
    if match:
        return now_ns - int(match.group(1)) * _UNIT_S[match.group(2)] * 1_000_000_000
    if "T" in value.upper() or " " in value or ":" in value:
        if value[-1:] in ("Z", "z"):  # Python 3.10's fromisoformat does not accept "Z"
            value = value[:-1] + "+00:00"
        try:
            moment = datetime.fromisoformat(value)
            if moment.tzinfo is None:
                moment = moment.astimezone()
            return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1_000
        except (ValueError, OverflowError, OSError):
            raise ConfigError(f"{_EXPECTED}, got {text!r}") from None
    from .report import parse_bound  # dates, today, yesterday: read as the report reads them

    try:
        return parse_bound(value, now_ns, None, end=end)
    except ConfigError:
        raise ConfigError(f"{_EXPECTED}, got {text!r}") from None


class PromptWindow:
    """Keeps the records of prompts that started in ``[since_ns, until_ns)``; either bound may be ``None``.

    One instance per session log (it remembers which of the session's prompts are in).
    """

    __slots__ = ("_decided", "since_ns", "until_ns")

    def __init__(self, since_ns: int | None = None, until_ns: int | None = None) -> None:
        self.since_ns = since_ns
        self.until_ns = until_ns
        self._decided: dict[int, bool] = {}  # trace id → in the window (prompts still open)

    def __repr__(self) -> str:
        return f"PromptWindow(since_ns={self.since_ns!r}, until_ns={self.until_ns!r})"

    def contains(self, time_ns: int) -> bool:
        """Whether a moment is in the window."""
        if self.since_ns is not None and time_ns < self.since_ns:
            return False
        return self.until_ns is None or time_ns < self.until_ns

    def keep(self, records: list[Record]) -> list[Record]:
        """The records that belong in the window (the same list when all of them do)."""
        kept = [rec for rec in records if self._wanted(rec)]
        return records if len(kept) == len(records) else kept

    def _wanted(self, rec: Record) -> bool:
        trace: int | None = getattr(rec, "trace_id", None)
        moment: int = getattr(rec, "time_ns", 0) or getattr(rec, "start_ns", 0)
        if not trace:  # not part of a prompt: by its own time
            return self.contains(moment)
        if rec.__class__ is PromptStarted:
            self._decided[trace] = inside = self.contains(moment)
            return inside
        decided = self._decided.get(trace)
        if decided is None:
            # No PromptStarted for this trace (a prompt with no user message, or the log read from its middle):
            # a PromptRun says when it started; anything else is the first work it completed.
            decided = self._decided[trace] = self.contains(moment)
        if rec.__class__ is PromptRun:
            del self._decided[trace]  # the prompt is over: forget it
        return decided
