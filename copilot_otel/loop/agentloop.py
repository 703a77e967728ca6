"""The agent loop: a pure state machine from session events to neutral activity records.

One :class:`AgentLoop` follows one session log. It keeps only what is still open (the current prompt, its
agents, turns and tools; :mod:`copilot_otel.loop.foldstate`) and hands out each record of
:mod:`copilot_otel.model.activity` the moment its work is complete, so the live daemon can export a tool call as soon
as its ``tool.execution_complete`` is read.

The loop it follows::

    prompt                               a human prompt, to where its work ends (one trace)
    ├── turn 0                           assistant.turn_start … turn_end of the main agent
    │   ├── model call                   the turn's call to the model (usage record, assistant.message)
    │   ├── tool call bash               each tool execution
    │   └── tool call task
    │       └── agent explore            a sub-agent, with its own turns, model calls and tools
    └── turn 1 …

This module is the shell: what the pipeline calls (:meth:`AgentLoop.feed`, :meth:`AgentLoop.close`, the resume
point and the live figures) and the wiring of the entity modules of :mod:`copilot_otel.loop`, which do the work
(one per entity: prompts, turns and model calls, tools, sub-agents, session facts, notes). It stays a module of
its own, above that package, so its importers need not know the split and the entities cannot reach the shell.

Pure: no I/O, no clock, no attribute names. Timestamps and ids come only from the events, so the same log always
gives the same records; what may be kept of the content passes the injected :class:`~copilot_otel.settings.content.
ContentGate`; the runaway rules (:mod:`copilot_otel.loop.runaway`) say when a prompt runs away. Everything a backend
sees is decided later, by the projections (:mod:`copilot_otel.projections`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model.activity import CloseReason, Record
from ..model.inputs import Event
from ..model.records import DropReason, replace
from . import agents, prompts, tools, turns
from .core import FoldSettings, LoopState, Translator
from .foldstate import SessionContext
from .runaway import RunawayThresholds

__all__ = ["AgentLoop", "FoldSettings", "LiveStats", "RunawayThresholds", "SessionContext"]


@dataclass(frozen=True, slots=True)
class LiveStats:
    """What the live gauges show about a prompt in progress."""

    trace_id: int
    span_id: int
    started_ns: int
    last_event_ns: int
    turns: int
    tool_calls: int
    identical_streak: int
    error_streak: int


class AgentLoop(LoopState):
    """Follows one session's agent loop and returns the activity records each event completes.

    Usage::

        loop = AgentLoop(session_id_hint, translator, settings)  # e.g. sources.copilot.translator.COPILOT
        for event in events:
            handle(loop.feed(event))
        handle(loop.close(reason="file_ended"))

    Args:
        session_id: The session id from the folder or file name; replaced by ``session.start.sessionId``.
        translator: Which handler folds each event class: its source's (the loop knows no source's events).
        settings: Content policy and runaway thresholds.
        context: A snapshot from :meth:`context_snapshot` when resuming from a checkpoint.
    """

    __slots__ = ("_aside", "_handlers", "_keeps_unanswered")

    # The operations one entity calls of another (declared on LoopState), bound to the entity that does them.
    ensure_prompt = prompts.ensure_prompt
    close_prompt = prompts.close_prompt
    maybe_close_lingering = prompts.maybe_close_lingering
    adopt_pending = prompts.adopt_pending
    hold = prompts.hold
    route = agents.route
    close_agent = agents.close_agent
    end_turn = turns.end_turn
    emit_chat = turns.emit_chat
    standalone_chat = turns.standalone_chat
    flush_unanswered = turns.flush_unanswered
    end_tool = tools.end_tool
    emit_hook = tools.emit_hook
    end_permission = tools.end_permission

    def __init__(
        self,
        session_id: str,
        translator: Translator,
        settings: FoldSettings | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            settings or FoldSettings(),
            SessionContext.from_dict(context) if context else SessionContext(session_id=session_id),
        )
        self._handlers = translator.handlers
        self._keeps_unanswered = translator.keeps_unanswered
        self._aside = translator.aside

    # ------------------------------------------------------------------ public API
    @property
    def last_event_ns(self) -> int:
        """Timestamp of the latest event folded (kept in the context so a resumed loop knows it)."""
        return self.ctx.last_event_ns

    @last_event_ns.setter
    def last_event_ns(self, value: int) -> None:
        self.ctx.last_event_ns = value

    def context_snapshot(self) -> dict[str, Any]:
        """Session context to store in a checkpoint (see the resume model in docs/design.md)."""
        return self.ctx.to_dict()

    def resume_point(self) -> tuple[int, dict[str, Any]] | None:
        """Where a restarted loop must begin to rebuild the open prompts, and the context it needs there.

        ``None`` when no prompt is open (resuming at the current offset with :meth:`context_snapshot` is enough).
        """
        starts = [(p.start_offset, p.context_at_open) for p in self.prompts.values()]
        if self.pending_at is not None:
            starts.append(self.pending_at)  # hooks or a skill waiting for their prompt
        if not starts:
            return None
        offset, context = min(starts, key=lambda start: start[0])
        return offset, dict(context)

    @property
    def has_open_prompt(self) -> bool:
        """A prompt is open, or what belongs to the next one was read (the fold must be kept for it)."""
        return bool(self.prompts) or self.pending_at is not None

    def live_stats(self) -> list[LiveStats]:
        """Progress of each prompt still open, for the live gauges."""
        return [
            LiveStats(
                trace_id=p.trace_id,
                span_id=p.root.span_id,
                started_ns=p.start_ns,
                last_event_ns=p.last_ns,
                turns=p.turns_total,
                tool_calls=p.tool_calls,
                identical_streak=p.identical_streak,
                error_streak=p.error_streak,
            )
            for p in self.prompts.values()
        ]

    def take_dropped(self) -> list[tuple[DropReason, str]]:
        """The values dropped since the last call, once each (a field may be read twice): those the events lost
        as they were parsed and read (the pipeline parses into this list) and those the loop dropped itself (an
        end clamped to its start). Emptied in place: events the loop still holds note into it later."""
        taken = list(dict.fromkeys(self.dropped))
        self.dropped.clear()
        return taken

    def feed(self, event: Event, line_end: int | None = None) -> list[Record]:
        """Fold one event; returns the records it completed (often none).

        ``line_end``: the end of the line being read, when that is not the event's own (a framer gives an event it
        held back from an earlier line, e.g. Claude Code's compaction waiting for its prompt). What the event
        completes is then the reading of that line: its records carry that offset, so a restart's suppression of
        what was delivered before it does not swallow records that were still held when the daemon stopped.
        """
        out: list[Record] = []
        self.out = out
        self.offset = event.end_offset if line_end is None else line_end
        ctx = self.ctx
        if event.time_ns <= 0:
            # No usable timestamp on this line: date it at the previous event rather than lose it.
            event = replace(event, time_ns=ctx.last_event_ns)
        elif event.time_ns > ctx.last_event_ns:
            ctx.last_event_ns = event.time_ns
        kind = event.__class__
        if self.unanswered and kind not in self._keeps_unanswered:
            self.flush_unanswered()
        if ctx.imported and self._aside is not None and self._aside(self, event):
            return out
        handler = self._handlers.get(kind)
        if handler is not None:
            handler(self, event)
        return out

    def close(self, reason: CloseReason, time_ns: int | None = None) -> list[Record]:
        """Close everything still open (end of file, owner gone, idle timeout); marks it incomplete.

        Args:
            reason: Why the work is closed (``file_ended``, ``owner_gone``, ...).
            time_ns: When; defaults to the last event seen (never the wall clock).
        """
        out: list[Record] = []
        self.out = out
        self.adopt_pending(None)
        for prompt in list(self.prompts.values()):
            self.close_prompt(
                prompt, time_ns or max(prompt.last_ns, prompt.start_ns), reason, incomplete=True
            )
        return out
