"""A sub-agent's own log, read for its model calls when its parent's log says it ended (loop rule A's cost).

Claude Code, Codex and Gemini CLI write a sub-agent's work to a log of its own, folded apart, its spans in its
parent's trace. The parent's prompt costs its whole trace all the same: when the parent's framer says a sub-agent
is done (:class:`~copilot_otel.loop.neutral.SubagentDone`, naming its log), the parent's pipeline reads that log
here, through a pipeline of its own that builds records only (the same reader, framer and fold as the log's own
reading, so the same calls as its chat spans), and hands the fold the calls it holds. The fold reads no file.

A log that is missing, not a regular file (a FIFO would wait for a writer) or larger than
:data:`SUBAGENT_LOG_MAX_BYTES` is not read (:mod:`copilot_otel.sources.sidefiles` says it once); its calls stay
unknown, and the prompt says so. Sub-agents of sub-agents are read under them, at most :data:`SUBAGENT_DEPTH_MAX`
deep (a log that names itself ends there; each call counts once by its span).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..loop.neutral import SubagentDone
from ..model.activity import ModelCall, Record, SubagentCall
from ..sources.sessions import SessionFile
from ..sources.sidefiles import read_lines
from ..sources.tail import DEFAULT_MAX_LINE_BYTES, Line

if TYPE_CHECKING:
    from . import Pipeline

__all__ = ["SUBAGENT_DEPTH_MAX", "SUBAGENT_LOG_MAX_BYTES", "read_calls"]

# The most of a sub-agent's log read for its calls (a larger one is said, and left out of its prompt's cost).
SUBAGENT_LOG_MAX_BYTES = 1 << 30
# How deep sub-agents of sub-agents are read (Codex's go 2 deep).
SUBAGENT_DEPTH_MAX = 4


def read_calls(parent: Pipeline, event: SubagentDone) -> SubagentDone:
    """``event`` with the calls of the log it names (found by the parent's source beside the parent's log); its
    ``calls`` stay ``None`` when that log is not found or not read, or lies deeper than :data:`SUBAGENT_DEPTH_MAX`.
    The calls are the event's own (the framer made it just now); the parent keeps them too, for its own parent."""
    find = parent.source.subagent_log if parent.source is not None else None
    if find is None or parent.path is None or parent.depth >= SUBAGENT_DEPTH_MAX:
        return event
    log = find(parent.path, event.log)
    if log is None:
        return event
    child = type(parent).for_session(
        SessionFile(log.stem, log, None, parent.agent), parent.settings, project=False, depth=parent.depth + 1
    )
    calls: list[SubagentCall] = []
    read = False
    for number, (data, start, end) in enumerate(
        read_lines(log, "a sub-agent's log", SUBAGENT_LOG_MAX_BYTES, DEFAULT_MAX_LINE_BYTES), 1
    ):
        read = True
        _calls_of(child.feed(Line(start, end, data), number).records, calls)
    if not read:
        return event  # missing, empty or refused: nothing is known of it
    _calls_of(child.close("file_ended").records, calls)
    calls += child.subagent_calls
    parent.subagent_calls += calls
    event.calls = tuple(calls)
    return event


def _calls_of(records: Iterable[Record], into: list[SubagentCall]) -> None:
    """The model calls among ``records``, as the prompt that ran their sub-agent counts them."""
    for rec in records:
        if rec.__class__ is ModelCall:
            into.append(
                SubagentCall(rec.trace_id, rec.span_id, rec.provider, rec.model, rec.start_ns, rec.usage,
                             rec.calls)
            )  # fmt: skip
