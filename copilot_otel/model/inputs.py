"""The loop's inputs, named: what each entity handler reads of an event, as protocols.

The handlers of :mod:`.prompts`, :mod:`.turns`, :mod:`.tools`, :mod:`.notes` and :mod:`.session` read an event
only through a few attributes; each set is a :class:`~typing.Protocol` here (``ToolStartInput``: ``call_id``,
``name``, ``arguments``, ``mcp_server``, ``description`` and the envelope), and the handlers are typed against
them. Copilot CLI's typed views (:mod:`copilot_otel.model.events`) satisfy them as they are (their camelCase stays
there), so :data:`copilot_otel.loop.copilot.COPILOT` dispatches on Copilot's classes exactly as before; another
source's framer feeds the neutral events of :mod:`.neutral`, which satisfy them too.

Protocols cost nothing at run time: the dispatch is still one dictionary lookup by the event's class.
"""

from __future__ import annotations

from typing import Any, Protocol

from . import events as ev
from .events import Dropped

__all__ = [
    "AbortInput",
    "AnswerInput",
    "AttemptInput",
    "CompactionInput",
    "ContinuedInput",
    "Envelope",
    "ErrorInput",
    "PromptInput",
    "RootedInput",
    "SelfReportInput",
    "SessionStartInput",
    "ToolEndInput",
    "ToolStartInput",
    "TurnInput",
    "UsageInput",
]


class Envelope(Protocol):
    """What every event gives the loop: where it is in the log, when, and which agent and prompt it belongs to."""

    @property
    def type(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def time_ns(self) -> int: ...
    @property
    def agent_id(self) -> str | None: ...
    @property
    def offset(self) -> int: ...
    @property
    def end_offset(self) -> int: ...
    @property
    def dropped(self) -> Dropped: ...
    @property
    def interaction_id(self) -> str | None: ...
    @property
    def parent_tool_call_id(self) -> str | None: ...


class SessionStartInput(Envelope, Protocol):
    """A session begins (:func:`.session.on_session_start`)."""

    @property
    def session_id(self) -> str | None: ...
    @property
    def copilot_version(self) -> str | None: ...  # the version of the CLI that writes the log
    @property
    def producer(self) -> str | None: ...
    @property
    def selected_model(self) -> str | None: ...
    @property
    def reasoning_effort(self) -> str | None: ...
    @property
    def start_time(self) -> str | None: ...
    @property
    def context(self) -> ev.Context | None: ...


class PromptInput(Envelope, Protocol):
    """A user message (:func:`.prompts.on_user_message`): a human prompt when no ``source`` says otherwise. Its
    envelope ``id`` keys the prompt's trace (loop rule C: a source with prompt ids of its own makes it that id)."""

    @property
    def content(self) -> Any: ...
    @property
    def source(self) -> str | None: ...
    @property
    def delivery(self) -> str | None: ...
    @property
    def turn_id(self) -> str | None: ...
    @property
    def agent_mode(self) -> str | None: ...
    @property
    def autopilot_continuation(self) -> bool: ...


class TurnInput(Envelope, Protocol):
    """A turn begins or ends (:func:`.turns.on_turn_start`, :func:`.turns.on_turn_end`)."""

    @property
    def turn_id(self) -> str | None: ...


class UsageInput(Envelope, Protocol):
    """One model call's usage (:func:`.turns.on_usage_record`): tokens with input **including** the cached."""

    @property
    def usage(self) -> ev.Usage | None: ...


class AnswerInput(TurnInput, Protocol):
    """The model's answer (:func:`.turns.on_assistant_message`): the end of the turn's model call."""

    @property
    def model(self) -> str | None: ...
    @property
    def api_call_id(self) -> str | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def content(self) -> Any: ...
    @property
    def reasoning_text(self) -> Any: ...
    @property
    def has_tool_requests(self) -> bool: ...
    @property
    def tool_requests(self) -> tuple[ev.ToolRequest, ...]: ...
    @property
    def has_model_call_ids(self) -> bool: ...


class ToolStartInput(Envelope, Protocol):
    """A tool call begins (:func:`.tools.on_tool_start`)."""

    @property
    def call_id(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def arguments(self) -> Any: ...
    @property
    def mcp_server(self) -> str | None: ...
    @property
    def description(self) -> str | None: ...


class ToolEndInput(Envelope, Protocol):
    """A tool call ends (:func:`.tools.on_tool_complete`); ``error_code`` ``denied``: it never ran."""

    @property
    def call_id(self) -> str | None: ...
    @property
    def success(self) -> bool: ...
    @property
    def error_code(self) -> str | None: ...
    @property
    def error_message(self) -> str | None: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def user_requested(self) -> bool: ...
    @property
    def result(self) -> Any: ...
    @property
    def sandboxed(self) -> bool | None: ...
    @property
    def file_edits(self) -> int | None: ...
    @property
    def denied_by(
        self,
    ) -> str | None: ...  # who refused a denied call, when the source says (a mode, a hook, …)


class CompactionInput(Envelope, Protocol):
    """The context was compacted (the compaction note of :mod:`.notes`)."""

    @property
    def complete(self) -> bool: ...
    @property
    def trigger(self) -> str | None: ...
    @property
    def success(self) -> bool | None: ...
    @property
    def pre_tokens(self) -> int | None: ...
    @property
    def post_tokens(self) -> int | None: ...
    @property
    def tokens_removed(self) -> int | None: ...
    @property
    def messages_removed(self) -> int | None: ...
    @property
    def current_tokens(self) -> int | None: ...
    @property
    def token_limit(self) -> int | None: ...
    @property
    def call(self) -> ev.CompactionCall | None: ...


class AbortInput(Envelope, Protocol):
    """The user stopped the prompt (the abort note of :mod:`.notes`)."""

    @property
    def reason(self) -> str | None: ...


class ErrorInput(Envelope, Protocol):
    """An error that ended the work (the error note of :mod:`.notes`)."""

    @property
    def error_type(self) -> str | None: ...
    @property
    def message(self) -> str | None: ...
    @property
    def status_code(self) -> int | None: ...


class AttemptInput(Envelope, Protocol):
    """One failed attempt of a model call (:func:`.turns.on_attempt_failed`), from ``start_ns`` to the event."""

    @property
    def start_ns(self) -> int: ...
    @property
    def model(self) -> str | None: ...
    @property
    def error_type(self) -> str | None: ...
    @property
    def message(self) -> str | None: ...
    @property
    def attempt(self) -> int | None: ...


class ContinuedInput(Envelope, Protocol):
    """The current prompt continues another trace (:func:`.prompts.on_continued`): a forked session's first."""

    @property
    def trace_id(self) -> int: ...  # the trace it continues (0: unknown)
    @property
    def span_id(self) -> int: ...  # that trace's root span (0: unknown)
    @property
    def copied_records(self) -> int: ...  # records of that history the log held again, skipped


class SelfReportInput(Envelope, Protocol):
    """What the CLI says of its own session (:func:`.session.on_self_report`): its title, its own accounting."""

    @property
    def title(self) -> str | None: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def api_duration_ms(self) -> float | None: ...
    @property
    def api_duration_without_retries_ms(self) -> float | None: ...
    @property
    def tool_duration_ms(self) -> float | None: ...
    @property
    def duration_ms(self) -> float | None: ...
    @property
    def model_costs(self) -> tuple[tuple[str, float], ...]: ...


class RootedInput(Envelope, Protocol):
    """Loop rule A: a fold rooted in another fold's span (:func:`.prompts.on_rooted`): the sub-agent's own file."""

    @property
    def session_id(self) -> str | None: ...  # the parent's session (its ids are that session's)
    @property
    def prompt_key(self) -> str: ...  # the prompt whose trace it is in (the parent's)
    @property
    def agent_key(self) -> str: ...  # the sub-agent's id: its span is span_id(session, "agent", agent_key)
    @property
    def parent_span_id(self) -> int: ...  # the span of the tool call that started it
    @property
    def task_call_id(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def description(self) -> str | None: ...
    @property
    def content(self) -> Any: ...  # its task
