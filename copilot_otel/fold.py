"""Fold stage: session events in, finished span / log / metric records out. Pure: no I/O, no clock.

The fold is two stages joined: the agent loop (:class:`~copilot_otel.agentloop.AgentLoop`, events → neutral
activity records) and the projections (:class:`~copilot_otel.project.Projector`, records → spans, log events and
measurements in every vocabulary). :class:`SessionFold` is what the readers drive (replay, the daemon, ``show``):
one per session log, fed one event at a time, handing out each emission the moment its work is complete.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .agentloop import AgentLoop, FoldSettings, LiveStats, RunawayThresholds, SessionContext
from .project import Projector
from .records import Emission, Event

__all__ = ["FoldSettings", "LiveStats", "RunawayThresholds", "SessionContext", "SessionFold"]


class SessionFold:
    """Folds one session's events into spans, log events and measurements.

    Usage::

        fold = SessionFold(session_id_hint, settings)
        for event in events:
            emit(fold.feed(event))
        emit(fold.close(reason="file_ended"))

    Args:
        session_id: The session id from the folder or file name; replaced by ``session.start.sessionId``.
        settings: Content policy and runaway thresholds.
        context: A snapshot from :meth:`context_snapshot` when resuming from a checkpoint.
    """

    def __init__(
        self,
        session_id: str,
        settings: FoldSettings | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        self.loop = AgentLoop(session_id, settings, context)
        self.settings = self.loop.settings
        self.ctx = self.loop.ctx
        self._project = Projector(self.settings.content).project

    @property
    def last_event_ns(self) -> int:
        """Timestamp of the latest event folded (kept in the context so a resumed fold knows it)."""
        return self.loop.last_event_ns

    def context_snapshot(self) -> dict[str, Any]:
        """Session context to store in a checkpoint (see the resume model in docs/design.md)."""
        return self.loop.context_snapshot()

    def resume_point(self) -> tuple[int, dict[str, Any]] | None:
        """Where a restarted fold must begin to rebuild the open prompts, and the context it needs there."""
        return self.loop.resume_point()

    @property
    def has_open_prompt(self) -> bool:
        return self.loop.has_open_prompt

    def live_stats(self) -> list[LiveStats]:
        """Progress of each prompt still open, for the live gauges."""
        return self.loop.live_stats()

    def feed(self, event: Event) -> list[Emission]:
        """Fold one event; returns the records it completed (often none)."""
        records = self.loop.feed(event)
        return self._project(records) if records else []

    def close(self, reason: str, time_ns: int | None = None) -> list[Emission]:
        """Close everything still open (end of file, owner gone, idle timeout); marks it incomplete."""
        return self._project(self.loop.close(reason, time_ns))
