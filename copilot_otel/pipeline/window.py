"""A time window over prompts: ``replay --since/--until`` and ``run --backfill DATE`` select by the events' time.

A prompt is in the window when it *started* in it (``since <= start < until``), and then all of it is in: its
spans, log events and metric points, even the parts that happened after ``until``. What belongs to no prompt
(a session's start, resume and shutdown) is in when it happened in the window. Times are the events' own
(``timestamp`` in the log), never a file's modification time: a copied or touched old log is not new.

The window is a stage between the agent loop and the projections (:class:`~copilot_otel.pipeline.Pipeline`
applies it), so the loop stays pure and unaware of it, and whatever the pipeline emits is already selected.
A prompt is known by its :class:`~copilot_otel.model.activity.PromptStarted` record (a human prompt's first moment);
a prompt without one (activity with no user message before it) is placed by the first record it completes.
The bounds are read from what the user typed by :mod:`copilot_otel.settings.moments`, the one time grammar.
"""

from __future__ import annotations

from ..model.activity import PromptRun, PromptStarted, Record

__all__ = ["PromptWindow"]


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
