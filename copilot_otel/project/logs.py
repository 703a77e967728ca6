"""Log events: the moments a person or an alert wants to read as a line (OTel log records with ``event.name``).

Each record that deserves a line gets one, correlated with its prompt's trace (and its span, where it has one of
its own), carrying ``session.id`` and the conversation id so logs join traces in every backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..activity import (
    Abort,
    Compaction,
    Detection,
    ModeChange,
    ModelCall,
    Notification,
    PromptRun,
    PromptStarted,
    SessionError,
    SessionResumed,
    SessionShutdown,
    SessionStarted,
    TaskComplete,
)
from ..records import LogRecord, Severity
from . import copilot, genai, ours
from .spans import STATUS_MESSAGE_MAX


def _log(
    name: str,
    time_ns: int,
    body: str,
    attrs: dict[str, Any],
    session_id: str,
    trace_id: int | None,
    span_id: int | None,
    offset: int,
    severity: Severity = Severity.INFO,
) -> LogRecord:
    attrs.setdefault(genai.SESSION_ID, session_id)
    attrs.setdefault(genai.CONVERSATION, session_id)
    return LogRecord(name, time_ns, severity, body, attrs, trace_id, span_id, offset)


def session_started(rec: SessionStarted) -> LogRecord:
    attrs: dict[str, Any] = {}
    if rec.cli_version is not None:
        attrs[ours.CLI_VERSION] = rec.cli_version
    if rec.model is not None:
        attrs[genai.REQUEST_MODEL] = rec.model
    return _log(
        "copilot_otel.session.started",
        rec.time_ns,
        "session started",
        attrs,
        rec.session_id,
        None,
        None,
        rec.source_offset,
    )


def session_resumed(rec: SessionResumed) -> LogRecord:
    return _log(
        "copilot_otel.session.resumed",
        rec.time_ns,
        "session resumed",
        {},
        rec.session_id,
        None,
        None,
        rec.source_offset,
    )


def session_shutdown(rec: SessionShutdown) -> LogRecord:
    return _log(
        "copilot_otel.session.shutdown",
        rec.time_ns,
        "session shutdown",
        copilot.shutdown_totals(rec),
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
    )


def session_error(rec: SessionError) -> LogRecord:
    message = rec.message[:STATUS_MESSAGE_MAX]
    attrs: dict[str, Any] = {genai.ERROR_TYPE: rec.error_type, genai.EXCEPTION_MESSAGE: message}
    if rec.status_code is not None:
        attrs[copilot.ERROR_STATUS_CODE] = rec.status_code
    return _log(
        "copilot_otel.session.error",
        rec.time_ns,
        message,
        attrs,
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
        Severity.ERROR,
    )


def abort(rec: Abort) -> LogRecord:
    body = f"prompt aborted: {rec.reason}" if rec.trace_id is not None else f"aborted: {rec.reason}"
    return _log(
        "copilot_otel.abort",
        rec.time_ns,
        body,
        copilot.abort(rec),
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
        Severity.WARN,
    )


def compaction(rec: Compaction) -> LogRecord:
    return _log(
        "copilot_otel.compaction",
        rec.time_ns,
        "context compacted",
        copilot.compaction(rec),
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
    )


def prompt_started(rec: PromptStarted) -> LogRecord:
    attrs: dict[str, Any] = {"copilot_otel.prompt.index": rec.index}
    if rec.interaction_id is not None:
        attrs[copilot.INTERACTION_ID] = rec.interaction_id
    if rec.delivery is not None:
        attrs["copilot_otel.prompt.delivery"] = rec.delivery
    return _log(
        "copilot_otel.prompt.started",
        rec.time_ns,
        "prompt started",
        attrs,
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
    )


def prompt_ended(rec: PromptRun) -> LogRecord:
    attrs: dict[str, Any] = {
        ours.PROMPT_OUTCOME: rec.outcome,
        copilot.TURN_COUNT: rec.turn_count,
        ours.TURNS_TOTAL: rec.turns_total,
        ours.PROMPT_TOOL_CALLS: rec.tool_calls,
        "copilot_otel.prompt.duration_s": (rec.end_ns - rec.start_ns) / 1e9,
        "gen_ai.usage.input_tokens": rec.usage.input,
        "gen_ai.usage.output_tokens": rec.usage.output,
    }
    if rec.incomplete_reason is not None:
        attrs[ours.INCOMPLETE_REASON] = rec.incomplete_reason
    return _log(
        "copilot_otel.prompt.ended",
        rec.end_ns,
        f"prompt {rec.outcome}",
        attrs,
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
        Severity.WARN if rec.outcome in ("error", "aborted") else Severity.INFO,
    )


def detection(rec: Detection) -> LogRecord:
    attrs = ours.detection(rec, genai.TOOL_NAME)
    attrs[ours.TURNS_TOTAL] = rec.turns_total
    attrs[ours.PROMPT_TOOL_CALLS] = rec.tool_calls
    return _log(
        ours.RUNAWAY_EVENT,
        rec.time_ns,
        f"runaway agent detected: {rec.reason}",
        attrs,
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
        Severity.WARN,
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
    return _log(
        "gen_ai.client.inference.operation.details",
        rec.end_ns,
        f"chat {rec.model}",
        attrs,
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
    )


def notification(rec: Notification) -> LogRecord:
    return _log(
        "copilot_otel.notification",
        rec.time_ns,
        f"background work finished: {rec.kind}",
        copilot.notification(rec),
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
    )


def task_complete(rec: TaskComplete) -> LogRecord:
    done = "task complete" if rec.success is not False else "task ended unsuccessfully"
    return _log(
        "copilot_otel.task_complete",
        rec.time_ns,
        done,
        ours.task_complete(rec),
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
    )


def mode_change(rec: ModeChange) -> LogRecord:
    return _log(
        "copilot_otel.mode_changed",
        rec.time_ns,
        f"mode {rec.previous or '?'} -> {rec.new or '?'}",
        ours.mode_change(rec),
        rec.session_id,
        rec.trace_id,
        rec.span_id,
        rec.source_offset,
    )
