"""Log events: the moments a person or an alert wants to read as a line (OTel log records with ``event.name``).

Each record that deserves a line gets one, correlated with its prompt's trace (and its span, where it has one of
its own), carrying ``session.id`` and the conversation id so logs join traces in every backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..model.activity import (
    Abort,
    Compaction,
    Detection,
    ModeChange,
    ModelCall,
    Notification,
    PromptRun,
    PromptStarted,
    SessionError,
    SessionImported,
    SessionResumed,
    SessionShutdown,
    SessionStarted,
    SessionWarning,
    TaskComplete,
)
from ..model.records import LogRecord, Severity
from . import copilot, genai, ours
from .spans import STATUS_MESSAGE_MAX
from .vendors import COPILOT, Vocabulary


class _Moment(Protocol):
    """What every record of a log event carries: its session and the line that completed it."""

    @property
    def session_id(self) -> str: ...
    @property
    def source_offset(self) -> int: ...


class _InTrace(_Moment, Protocol):
    """A record that happened during a prompt (trace and span ids ``None`` when outside any)."""

    @property
    def trace_id(self) -> int | None: ...
    @property
    def span_id(self) -> int | None: ...


def _log(
    rec: _Moment,
    time_ns: int,
    name: str,
    body: str,
    attrs: dict[str, Any],
    severity: Severity = Severity.INFO,
    trace_id: int | None = None,
    span_id: int | None = None,
) -> LogRecord:
    """The log event of ``rec`` (session-level unless given a trace); its session id joins the attributes."""
    session_id = rec.session_id
    attrs.setdefault(genai.SESSION_ID, session_id)
    attrs.setdefault(genai.CONVERSATION, session_id)
    return LogRecord(name, time_ns, severity, body, attrs, trace_id, span_id, rec.source_offset)


def _traced(
    rec: _InTrace,
    time_ns: int,
    name: str,
    body: str,
    attrs: dict[str, Any],
    severity: Severity = Severity.INFO,
) -> LogRecord:
    """The log event of a record on its prompt's trace and span."""
    return _log(rec, time_ns, name, body, attrs, severity, rec.trace_id, rec.span_id)


def session_started(rec: SessionStarted) -> LogRecord:
    attrs: dict[str, Any] = {}
    if rec.cli_version is not None:
        attrs[ours.CLI_VERSION] = rec.cli_version
    if rec.model is not None:
        attrs[genai.REQUEST_MODEL] = rec.model
    return _log(rec, rec.time_ns, "copilot_otel.session.started", "session started", attrs)


def session_resumed(rec: SessionResumed) -> LogRecord:
    return _log(rec, rec.time_ns, "copilot_otel.session.resumed", "session resumed", {})


def session_shutdown(rec: SessionShutdown, totals: dict[str, Any]) -> LogRecord:
    """``totals``: :func:`.copilot.shutdown_totals` of ``rec`` (its prompt's span event carries them too)."""
    return _traced(rec, rec.time_ns, "copilot_otel.session.shutdown", "session shutdown", totals)


def session_error(rec: SessionError, vocab: Vocabulary = COPILOT) -> LogRecord:
    message = rec.message[:STATUS_MESSAGE_MAX]
    attrs: dict[str, Any] = {genai.ERROR_TYPE: rec.error_type, genai.EXCEPTION_MESSAGE: message}
    if rec.status_code is not None:
        attrs[vocab.status_code] = rec.status_code
    return _traced(rec, rec.time_ns, "copilot_otel.session.error", message, attrs, Severity.ERROR)


def session_warning(rec: SessionWarning) -> LogRecord:
    body = f"warning ({rec.warning_type}): {rec.message}" if rec.message else f"warning: {rec.warning_type}"
    return _traced(
        rec, rec.time_ns, ours.WARNING_EVENT, body[:STATUS_MESSAGE_MAX], ours.warning(rec), Severity.WARN
    )


def session_imported(rec: SessionImported) -> LogRecord:
    """What ``copilot sessions import`` brought in, dated by the transcript (not model calls made here)."""
    body = (
        f"imported transcript: {rec.user_messages} user and {rec.assistant_messages} assistant messages, "
        f"{rec.tool_calls} tool calls"
    )
    return _log(rec, rec.time_ns, "copilot_otel.session.imported", body, ours.imported(rec))


def abort(rec: Abort, vocab: Vocabulary = COPILOT) -> LogRecord:
    body = f"prompt aborted: {rec.reason}" if rec.trace_id is not None else f"aborted: {rec.reason}"
    return _traced(rec, rec.time_ns, "copilot_otel.abort", body, vocab.abort(rec), Severity.WARN)


def compaction(rec: Compaction, vocab: Vocabulary = COPILOT) -> LogRecord:
    return _traced(rec, rec.time_ns, "copilot_otel.compaction", "context compacted", vocab.compaction(rec))


def prompt_started(rec: PromptStarted, vocab: Vocabulary = COPILOT) -> LogRecord:
    attrs: dict[str, Any] = {"copilot_otel.prompt.index": rec.index}
    if rec.interaction_id is not None and vocab.interaction_id is not None:
        attrs[vocab.interaction_id] = rec.interaction_id
    if rec.delivery is not None:
        attrs["copilot_otel.prompt.delivery"] = rec.delivery
    return _traced(rec, rec.time_ns, "copilot_otel.prompt.started", "prompt started", attrs)


def prompt_ended(rec: PromptRun, vocab: Vocabulary = COPILOT) -> LogRecord:
    attrs: dict[str, Any] = {
        ours.PROMPT_OUTCOME: rec.outcome,
        vocab.turn_count: rec.turn_count,
        ours.TURNS_TOTAL: rec.turns_total,
        ours.PROMPT_TOOL_CALLS: rec.tool_calls,
        "copilot_otel.prompt.duration_s": (rec.end_ns - rec.start_ns) / 1e9,
    }
    genai.usage_counts(attrs, rec.usage)
    if rec.incomplete_reason is not None:
        attrs[ours.INCOMPLETE_REASON] = rec.incomplete_reason
    return _traced(
        rec,
        rec.end_ns,
        "copilot_otel.prompt.ended",
        f"prompt {rec.outcome}",
        attrs,
        Severity.WARN if rec.outcome in ("error", "aborted") else Severity.INFO,
    )


def detection(rec: Detection) -> LogRecord:
    attrs = ours.detection(rec, genai.TOOL_NAME)
    attrs[ours.TURNS_TOTAL] = rec.turns_total
    attrs[ours.PROMPT_TOOL_CALLS] = rec.tool_calls
    return _traced(
        rec, rec.time_ns, ours.RUNAWAY_EVENT, f"runaway agent detected: {rec.reason}", attrs, Severity.WARN
    )


def inference_details(rec: ModelCall, content: Mapping[str, str]) -> LogRecord:
    """The chat's ``gen_ai.client.inference.operation.details`` event (``EVENT_ONLY``/``SPAN_AND_EVENT``).

    It carries the same message JSON as the span would, so a backend that keeps logs but not span attributes (or
    keeps them longer, or with other access rules) has the conversation; it sits on the chat span (trace and
    span id) so the two join. One per chat, with whatever messages were captured.
    """
    attrs: dict[str, Any] = {
        genai.OPERATION: genai.CHAT,
        genai.PROVIDER: rec.provider,
        genai.REQUEST_MODEL: rec.model,
        genai.RESPONSE_MODEL: rec.response_model,
    }
    if rec.response_id is not None:
        attrs[genai.RESPONSE_ID] = rec.response_id
    if rec.finish_reason:
        attrs[genai.FINISH_REASONS] = (rec.finish_reason,)
    for key in (genai.INPUT_MESSAGES, genai.OUTPUT_MESSAGES):
        if key in content:
            attrs[key] = content[key]
    return _traced(
        rec,
        rec.end_ns,
        genai.DETAILS_EVENT,
        f"chat {rec.model}",
        attrs,
    )


def notification(rec: Notification) -> LogRecord:
    return _traced(
        rec,
        rec.time_ns,
        "copilot_otel.notification",
        f"background work finished: {rec.kind}",
        copilot.notification(rec),
    )


def task_complete(rec: TaskComplete) -> LogRecord:
    done = "task complete" if rec.success is not False else "task ended unsuccessfully"
    return _traced(rec, rec.time_ns, "copilot_otel.task_complete", done, ours.task_complete(rec))


def mode_change(rec: ModeChange) -> LogRecord:
    return _traced(
        rec,
        rec.time_ns,
        "copilot_otel.mode_changed",
        f"mode {rec.previous or '?'} -> {rec.new or '?'}",
        ours.mode_change(rec),
    )
