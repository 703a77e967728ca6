"""Spans: each finished piece of work becomes one span carrying every vocabulary at once.

The trace model (docs/design.md)::

    invoke_agent                          one trace per prompt (root)
    ├── turn 0                            one per assistant turn
    │   ├── chat gpt-4.1                  the turn's model call (CLIENT)
    │   ├── execute_tool bash             each tool execution
    │   └── execute_tool task
    │       └── invoke_agent explore      a sub-agent, with its own turns, chats and tools
    └── turn 1 …

A span's attributes are the union of what each vocabulary module writes for its record; only this module knows
span names, kinds and statuses, and where captured content goes (on spans only when the policy says so).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from ..model.activity import (
    Abort,
    AgentRun,
    Compaction,
    Detection,
    HookRun,
    ModeChange,
    ModelCall,
    Note,
    Notification,
    Outcome,
    PermissionWait,
    PromptRun,
    SessionError,
    SessionShutdown,
    SessionWarning,
    SkillInvoked,
    TaskComplete,
    ToolCall,
    Truncation,
    Turn,
    UserMessage,
)
from ..model.records import AttrValue, SpanEventRecord, SpanKind, SpanRecord, StatusCode
from . import copilot, genai, langfuse, messages, ours
from . import openinference as oi
from .vendors import COPILOT, Vocabulary

# Status messages (and the messages of exception events) are cut to this many characters.
STATUS_MESSAGE_MAX = 512


class _Work(Protocol):
    """What every record of a span carries: where it sits in its trace, when, and the line that completed it."""

    @property
    def trace_id(self) -> int: ...
    @property
    def span_id(self) -> int: ...
    @property
    def parent_span_id(self) -> int | None: ...
    @property
    def start_ns(self) -> int: ...
    @property
    def end_ns(self) -> int: ...
    @property
    def source_offset(self) -> int: ...


def _span(
    rec: _Work,
    name: str,
    kind: SpanKind,
    attrs: dict[str, AttrValue],
    failure: str | None = None,
    events: tuple[SpanEventRecord, ...] = (),
) -> SpanRecord:
    """The span of ``rec``; ``failure`` (its status message, cut) marks it as an error for Langfuse too."""
    if failure is not None:
        langfuse.failed(attrs, failure)
    # Positional, in SpanRecord's field order: a backfill builds one per span.
    return SpanRecord(
        rec.trace_id,
        rec.span_id,
        rec.parent_span_id,
        name,
        kind,
        rec.start_ns,
        rec.end_ns,
        attrs,
        StatusCode.UNSET if failure is None else StatusCode.ERROR,
        failure,
        events,
        rec.source_offset,
    )


def model_call(
    rec: ModelCall, content: Mapping[str, str] | None, error_type: str | None, vocab: Vocabulary = COPILOT
) -> SpanRecord:
    """``chat {model}``; ``content`` is the captured conversation when it goes on spans, ``error_type`` the
    call's (:func:`.genai.model_call_error`), ``vocab`` the agent's own names (:mod:`.vendors`)."""
    attrs = genai.model_call(rec, error_type)
    vocab.model_call(attrs, rec)
    oi.model_call(attrs, rec)
    ours.model_call(attrs, rec)
    if content:
        attrs.update(content)
    # One rule on every span: it carries ``error.type`` exactly when its status is ERROR (the semantic conventions'
    # "Recording errors"), so a call the user cut (``error.type=cancelled``) is an ERROR span, as its root is.
    failure = None
    if rec.outcome is Outcome.ERROR:
        failure = (rec.message or rec.error_type or "model call failed")[:STATUS_MESSAGE_MAX]
    elif rec.outcome is Outcome.CANCELLED:
        failure = "model call cancelled"
    return _span(rec, f"chat {rec.model}", SpanKind.CLIENT, attrs, failure)


def chat_content(rec: ModelCall) -> dict[str, str]:
    """A model call's captured messages, as span or details-event attributes (empty when nothing is captured)."""
    calls = [messages.tool_call_part(r.call_id, r.name, r.arguments_json) for r in rec.tool_requests]
    sent = [
        messages.user_message(m.text)
        if m.call_id is None
        else messages.tool_result_message(m.call_id, m.text)
        for m in rec.input_messages
    ]
    return messages.chat_attributes(sent, rec.reasoning, rec.output_text, calls, rec.finish_reason)


def tool_call(rec: ToolCall, content_on_spans: bool, vocab: Vocabulary = COPILOT) -> SpanRecord:
    """``execute_tool {name}``."""
    attrs = genai.tool_call(rec)
    vocab.tool_call(attrs, rec)
    oi.tool_call(attrs, rec, content_on_spans)
    ours.tool_call(attrs, rec)
    if content_on_spans and rec.result_text is not None:
        attrs[genai.TOOL_CALL_RESULT] = rec.result_text
    name = f"execute_tool {rec.name}"
    if rec.success:
        return _span(rec, name, SpanKind.INTERNAL, attrs)
    failure = str(rec.message or attrs[genai.ERROR_TYPE])[:STATUS_MESSAGE_MAX]
    events: tuple[SpanEventRecord, ...] = ()
    if rec.error_type in ("ToolError", "denied"):
        events = (
            SpanEventRecord(
                genai.EXCEPTION_EVENT,
                rec.end_ns,
                {genai.EXCEPTION_TYPE: rec.error_type, genai.EXCEPTION_MESSAGE: failure},
            ),
        )
    return _span(rec, name, SpanKind.INTERNAL, attrs, failure, events)


def hook_run(rec: HookRun) -> SpanRecord:
    """``hook {type}``: one hook run, under the tool call it decides on or follows, else under the prompt; a
    hook that timed out or failed is an ERROR span (its message the status)."""
    attrs = genai.hook_run(rec)
    oi.hook_run(attrs, rec)
    langfuse.hook_run(attrs, rec)
    ours.hook_run(attrs, rec)
    failure = None
    if not rec.success:
        failure = (rec.error_message or attrs[genai.ERROR_TYPE])[:STATUS_MESSAGE_MAX]
    return _span(rec, f"hook {rec.hook_type}", SpanKind.INTERNAL, attrs, failure)


def permission(rec: PermissionWait) -> SpanRecord:
    """``permission``: the time the agent waited for the user to allow a tool (under that tool's span)."""
    attrs = genai.permission(rec)
    copilot.permission(attrs, rec)
    ours.permission(attrs, rec)
    return _span(rec, "permission", SpanKind.INTERNAL, attrs)


def turn(rec: Turn, vocab: Vocabulary = COPILOT) -> SpanRecord:
    """``turn {index}``: one assistant turn (the model call and the tools it asked for)."""
    attrs = genai.turn(rec)
    vocab.turn(attrs, rec)
    oi.turn(attrs, rec)
    ours.turn(attrs, rec)
    return _span(rec, f"turn {rec.index}", SpanKind.INTERNAL, attrs)


def agent_run(rec: AgentRun, vocab: Vocabulary = COPILOT) -> SpanRecord:
    """``invoke_agent {name}``: a sub-agent."""
    attrs = genai.agent_run(rec)
    vocab.agent_run(attrs, rec)
    oi.agent_run(attrs, rec)
    ours.agent_run(attrs, rec)
    attrs.update(messages.agent_attributes(rec.input_text, rec.output_text, rec.system_text))
    error = rec.outcome is Outcome.ERROR
    message = (
        (rec.status_message or rec.error_type or "sub-agent failed")[:STATUS_MESSAGE_MAX] if error else None
    )
    if message is not None:
        langfuse.failed(attrs, message)
    return SpanRecord(
        trace_id=rec.trace_id,
        span_id=rec.span_id,
        parent_span_id=rec.parent_span_id,
        name=f"invoke_agent {rec.name or 'agent'}",
        kind=SpanKind.INTERNAL,
        start_ns=rec.start_ns,
        end_ns=rec.end_ns,
        attributes=attrs,
        status=StatusCode.ERROR if error else StatusCode.UNSET,
        status_message=message if rec.status_message else None,
        source_offset=rec.source_offset,
    )


def prompt_run(
    rec: PromptRun,
    shutdown_totals: Callable[[SessionShutdown], dict[str, AttrValue]] = copilot.shutdown_totals,
    vocab: Vocabulary = COPILOT,
) -> SpanRecord:
    """``invoke_agent``: the prompt's root span, with what happened during it as span events (a shutdown's
    totals from ``shutdown_totals``, which may have them already for the shutdown's log event)."""
    attrs = genai.prompt_run(rec)
    vocab.prompt_run(attrs, rec)
    oi.prompt_run(attrs, rec)
    langfuse.prompt_run(attrs, rec, vocab.agent)
    ours.prompt_run(attrs, rec)
    attrs.update(messages.agent_attributes(rec.input_text, rec.output_text, rec.facts.system_prompt))
    if rec.error:
        langfuse.failed(
            attrs, (rec.status_message or rec.error_type or f"prompt {rec.outcome}")[:STATUS_MESSAGE_MAX]
        )
    return SpanRecord(
        trace_id=rec.trace_id,
        span_id=rec.span_id,
        parent_span_id=None,
        name=f"invoke_agent {rec.agent_name}" if rec.agent_name else "invoke_agent",
        kind=SpanKind.INTERNAL,
        start_ns=rec.start_ns,
        end_ns=rec.end_ns,
        attributes=attrs,
        status=StatusCode.ERROR if rec.error else StatusCode.UNSET,
        status_message=rec.status_message[:STATUS_MESSAGE_MAX] if rec.error and rec.status_message else None,
        events=tuple(note_event(note, shutdown_totals, vocab) for note in rec.notes),
        source_offset=rec.source_offset,
        links=(rec.continues,) if rec.continues is not None else (),
    )


def note_event(
    note: Note,
    shutdown_totals: Callable[[SessionShutdown], dict[str, AttrValue]] = copilot.shutdown_totals,
    vocab: Vocabulary = COPILOT,
) -> SpanEventRecord:
    """What happened during a prompt, as an event on its root span (named in the agent's own vocabulary where it
    names it; a shutdown, a truncation, a skill and a notification are only ever read from Copilot CLI's log)."""
    if isinstance(note, UserMessage):
        attrs = vocab.user_message(note)
        ours.user_message(attrs, note)
        return SpanEventRecord(vocab.user_message_event, note.time_ns, attrs)
    if isinstance(note, Detection):
        return SpanEventRecord(ours.RUNAWAY_EVENT, note.time_ns, ours.detection(note, genai.TOOL_NAME))
    if isinstance(note, SessionShutdown):
        return SpanEventRecord(copilot.SHUTDOWN_EVENT, note.time_ns, shutdown_totals(note))
    if isinstance(note, SessionError):
        attrs = {
            genai.EXCEPTION_TYPE: note.error_type,
            genai.EXCEPTION_MESSAGE: note.message[:STATUS_MESSAGE_MAX],
        }
        vocab.error(attrs, note)
        return SpanEventRecord(genai.EXCEPTION_EVENT, note.time_ns, attrs)
    if isinstance(note, Abort):
        return SpanEventRecord(vocab.abort_event, note.time_ns, vocab.abort(note))
    if isinstance(note, Compaction):
        name = vocab.compaction_complete_event if note.complete else vocab.compaction_start_event
        return SpanEventRecord(name, note.time_ns, vocab.compaction(note))
    if isinstance(note, Truncation):
        return SpanEventRecord(copilot.TRUNCATION_EVENT, note.time_ns, copilot.truncation(note))
    if isinstance(note, SkillInvoked):
        return SpanEventRecord(copilot.SKILL_EVENT, note.time_ns, copilot.skill(note))
    if isinstance(note, Notification):
        return SpanEventRecord(copilot.NOTIFICATION_EVENT, note.time_ns, copilot.notification(note))
    if isinstance(note, SessionWarning):
        return SpanEventRecord(ours.WARNING_EVENT, note.time_ns, ours.warning(note))
    if isinstance(note, TaskComplete):
        return SpanEventRecord(ours.TASK_COMPLETE_EVENT, note.time_ns, ours.task_complete(note))
    assert isinstance(note, ModeChange)
    return SpanEventRecord(ours.MODE_CHANGED_EVENT, note.time_ns, ours.mode_change(note))
