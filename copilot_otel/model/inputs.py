"""The loop's inputs: the envelope every event has, the values events carry, and what each handler reads.

Every event the loop folds is an :class:`Event`: its place in the log, its time, the agent it belongs to, and
where the values it loses as it is read are noted. A source's reader (:mod:`copilot_otel.sources`) subclasses it
with the fields of its own log; the neutral events of :mod:`copilot_otel.loop.neutral` subclass it with fields of
their own. The handlers of :mod:`copilot_otel.loop` read an event only through a few attributes; each set is a
:class:`~typing.Protocol` here (``ToolStartInput``: ``call_id``, ``name``, ``arguments``, ``mcp_server``,
``description`` and the envelope), and the handlers are typed against them, never against a source's classes.
Copilot CLI's typed views (:mod:`copilot_otel.sources.copilot.events`) satisfy them as they are (their camelCase
stays there), and so do the neutral events the other sources' framers give; which handler reads which class is
each source's translator (:class:`copilot_otel.loop.core.Translator`).

Protocols cost nothing at run time: the dispatch is still one dictionary lookup by the event's class.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Any, Protocol

from .records import DropReason, RecordBase, record

__all__ = [
    "AbortInput",
    "AgentSelectedInput",
    "AnswerInput",
    "AttemptInput",
    "CompactionCall",
    "CompactionInput",
    "ContentInput",
    "Context",
    "ContextInput",
    "ContinuedInput",
    "Dropped",
    "Envelope",
    "ErrorInput",
    "Event",
    "ExternalToolInput",
    "HookEndInput",
    "HookStartInput",
    "ModeChangeInput",
    "ModelChangeInput",
    "ModelMetrics",
    "NotificationInput",
    "PermissionAnswerInput",
    "PermissionRequestInput",
    "PromptInput",
    "ResumeInput",
    "RootedInput",
    "SelfReportInput",
    "SessionStartInput",
    "ShutdownInput",
    "SkillInput",
    "SubagentEndInput",
    "SubagentStartInput",
    "TaskCompleteInput",
    "ToolEndInput",
    "ToolRequest",
    "ToolStartInput",
    "TruncationInput",
    "TurnInput",
    "Usage",
    "UsageInput",
    "WarningInput",
]

# The values an event lost as it was read, as (reason, detail): where a reader's drops go. An event holds its
# reader's list (parse's caller gives one per log, the loop's), so a field read later, while the loop keeps the
# event, is still that log's drop; the pipeline returns them with the step of the line being folded.
Dropped = list[tuple[DropReason, str]]


# ---------------------------------------------------------------------------------------------- envelope
@record
class Event(RecordBase):
    """One event of a session log: the envelope every line has.

    An event of a type the loop does not read is read for its time only; the types it reads are subclasses
    (a source's typed views, the neutral events) that carry what their handler reads.

    Attributes:
        type: The event discriminator, e.g. ``assistant.turn_start``.
        id: The event's own id (UUID); synthesised from the byte offset when missing.
        time_ns: The event timestamp in Unix nanoseconds, 0 when the line has none usable (never the clock).
        data: The decoded record (``{}`` when absent) a source's fields read; never mutated, never read by the
            loop.
        agent_id: The sub-agent instance the event belongs to, ``None`` for the main agent.
        offset: Byte offset of the line's first byte in its file.
        end_offset: Byte offset just past the line's ``\\n``: the checkpoint after this event.
        dropped: Where the values its fields lose as they are read are noted (see :data:`Dropped`): its
            reader's list, or one of its own.
    """

    type: str
    id: str
    time_ns: int
    data: Mapping[str, Any]
    agent_id: str | None = None
    offset: int = 0
    end_offset: int = 0
    dropped: Dropped = field(default_factory=list)

    @property
    def interaction_id(self) -> str | None:
        """The human interaction the event belongs to, when its source says (Copilot CLI's events do)."""
        return None

    @property
    def parent_tool_call_id(self) -> str | None:
        """The ``task`` call a sub-agent's event belongs to, when its source says so instead of ``agent_id``."""
        return None


# ---------------------------------------------------------------------------------------------- nested values
@record
class Context(RecordBase):
    """Where the session runs (``session.start.context``, ``session.context_changed``)."""

    cwd: str | None
    git_root: str | None
    repository: str | None
    branch: str | None
    head_commit: str | None


@record
class ModelMetrics(RecordBase):
    """One model's cumulative totals in a ``session.shutdown`` (``modelMetrics.<model>``)."""

    model: str
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    requests: int | None
    cost: float | None
    nano_aiu: float | None


@record
class CompactionCall(RecordBase):
    """The compaction's own model call (``compactionTokensUsed``): the CLI writes no usage record for it. A count
    it lacks or holds out of range is ``None`` (unknown is not zero)."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    model: str | None
    duration_ms: float | None


@record
class Usage(RecordBase):
    """What a ``session.usage_record`` says of one model call.

    ``provider`` is ``github`` for the CLI's own API, the BYOK provider type (or ``byok``), ``None`` when the
    record does not say. A count or the cost the record lacks, or holds out of range (dropped, counted), is
    ``None``: unknown is not zero.
    """

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cost: float | None
    nano_aiu: float
    model: str | None
    api_call_id: str | None
    finish_reason: str | None
    ttft_ms: float | None
    duration_ms: float | None
    initiator: str | None
    provider: str | None
    # Reasoning output tokens (reasoning models); None when the record does not say.
    reasoning_tokens: int | None = None
    # The reasoning effort the call was made with (sub-agents' included), when the record says.
    reasoning_effort: str | None = None


@record
class ToolRequest(RecordBase):
    """A tool call the model asked for (``assistant.message.toolRequests[]``); ``arguments`` is content."""

    call_id: str | None
    name: str | None
    arguments: Any


# ---------------------------------------------------------------------------------------------- protocols
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
    def context(self) -> Context | None: ...


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
    def usage(self) -> Usage | None: ...


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
    def tool_requests(self) -> tuple[ToolRequest, ...]: ...
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
    def call(self) -> CompactionCall | None: ...


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


# ---------------------------------------------------------------------------------------------- session facts
class ResumeInput(Envelope, Protocol):
    """A new CLI process continues the session (:func:`.session.on_session_resume`)."""

    @property
    def selected_model(self) -> str | None: ...
    @property
    def reasoning_effort(self) -> str | None: ...
    @property
    def context(self) -> Context | None: ...


class ContextInput(Envelope, Protocol):
    """The working directory or git state changed (:func:`.session.on_context_changed`)."""

    @property
    def context(self) -> Context | None: ...


class ModelChangeInput(Envelope, Protocol):
    """The session's model from now on, or (``from_agent``) one agent's (:func:`.session.on_model_change`)."""

    @property
    def new_model(self) -> str | None: ...
    @property
    def reasoning_effort(self) -> str | None: ...
    @property
    def says_reasoning_effort(self) -> bool: ...  # the change names the effort (None: the model's default)
    @property
    def from_agent(self) -> bool: ...


class ShutdownInput(Envelope, Protocol):
    """The CLI process ends, with totals cumulative over the session's runs (:func:`.session.on_shutdown`)."""

    @property
    def shutdown_type(self) -> str | None: ...
    @property
    def nano_aiu(self) -> float | None: ...
    @property
    def api_duration_ms(self) -> float | None: ...
    @property
    def lines_added(self) -> int | None: ...
    @property
    def lines_removed(self) -> int | None: ...
    @property
    def premium_requests(self) -> float | None: ...
    @property
    def files_modified(self) -> int: ...
    @property
    def models(self) -> tuple[ModelMetrics, ...]: ...


# ---------------------------------------------------------------------------------------------- content only
class ContentInput(Envelope, Protocol):
    """Content read only to be captured: a system prompt (:func:`.prompts.on_system_message`), a reasoning block
    (:func:`.turns.on_reasoning`)."""

    @property
    def content(self) -> Any: ...


# ---------------------------------------------------------------------------------------------- tools around
class ExternalToolInput(Envelope, Protocol):
    """A started tool call handed to the process that registered the tool (:func:`.tools.on_external_tool`)."""

    @property
    def call_id(self) -> str | None: ...


class PermissionRequestInput(Envelope, Protocol):
    """The agent waits for the user to allow a tool (:func:`.tools.on_permission_requested`)."""

    @property
    def request_id(self) -> str | None: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def kind(self) -> str | None: ...


class PermissionAnswerInput(Envelope, Protocol):
    """The user's answer to a permission request (:func:`.tools.on_permission_completed`)."""

    @property
    def request_id(self) -> str | None: ...
    @property
    def result(self) -> str | None: ...


class HookStartInput(Envelope, Protocol):
    """A hook begins (:func:`.tools.on_hook_start`): the calls a pre-tool hook decides on, or the tool a post-tool
    hook follows."""

    @property
    def invocation_id(self) -> str | None: ...
    @property
    def hook_type(self) -> str | None: ...
    @property
    def tool_name(self) -> str | None: ...
    @property
    def tool_call_ids(self) -> tuple[str, ...]: ...


class HookEndInput(Envelope, Protocol):
    """A hook finished (:func:`.tools.on_hook_end`); ``denied_calls``: the tool calls it refused."""

    @property
    def invocation_id(self) -> str | None: ...
    @property
    def hook_type(self) -> str | None: ...
    @property
    def error_message(self) -> str | None: ...
    @property
    def error_source(self) -> str | None: ...
    @property
    def success(self) -> bool: ...
    @property
    def denied_calls(self) -> tuple[str, ...]: ...


# ---------------------------------------------------------------------------------------------- agents
class SubagentStartInput(Envelope, Protocol):
    """A sub-agent begins under its ``task`` call (:func:`.agents.on_subagent_started`)."""

    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def name(self) -> str | None: ...
    @property
    def display_name(self) -> str | None: ...
    @property
    def description(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def parent_agent_id(self) -> str | None: ...
    @property
    def background(self) -> bool: ...


class SubagentEndInput(Envelope, Protocol):
    """A sub-agent ended (:func:`.agents.on_subagent_end`), with its totals when the source gives them."""

    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def error(self) -> str | None: ...
    @property
    def cancelled(self) -> bool: ...
    @property
    def total_tokens(self) -> int | None: ...
    @property
    def total_tool_calls(self) -> int | None: ...
    @property
    def failed(self) -> bool: ...


class AgentSelectedInput(Envelope, Protocol):
    """An agent was chosen; without an agent id, the main one (:func:`.agents.on_agent_selected`)."""

    @property
    def name(self) -> str | None: ...
    @property
    def display_name(self) -> str | None: ...


# ---------------------------------------------------------------------------------------------- notes
class NotificationInput(Envelope, Protocol):
    """Background work (an agent, a shell) finished (the notification note of :mod:`.notes`)."""

    @property
    def kind(self) -> str | None: ...
    @property
    def notified_agent_id(self) -> str | None: ...
    @property
    def agent_type(self) -> str | None: ...
    @property
    def shell_id(self) -> str | None: ...
    @property
    def exit_code(self) -> int | None: ...


class TaskCompleteInput(Envelope, Protocol):
    """Autopilot or plan mode ended its task (the task-complete note of :mod:`.notes`)."""

    @property
    def outcome(self) -> str | None: ...
    @property
    def summary(self) -> Any: ...
    @property
    def success(self) -> bool | None: ...


class ModeChangeInput(Envelope, Protocol):
    """Interactive, plan or autopilot from now on (the mode note of :mod:`.notes`)."""

    @property
    def previous(self) -> str | None: ...
    @property
    def new(self) -> str | None: ...


class WarningInput(Envelope, Protocol):
    """Something went wrong without stopping the session (the warning note of :mod:`.notes`)."""

    @property
    def warning_type(self) -> str | None: ...
    @property
    def message(self) -> str | None: ...


class TruncationInput(Envelope, Protocol):
    """Messages dropped to fit the context window (the truncation note of :mod:`.notes`)."""

    @property
    def token_limit(self) -> int | None: ...
    @property
    def pre_tokens(self) -> int | None: ...
    @property
    def post_tokens(self) -> int | None: ...
    @property
    def tokens_removed(self) -> int | None: ...
    @property
    def messages_removed(self) -> int | None: ...


class SkillInput(Envelope, Protocol):
    """A skill ran; ``trigger`` ``user-invoked``: before the prompt it belongs to (the skill note of :mod:`.notes`)."""

    @property
    def name(self) -> str | None: ...
    @property
    def plugin(self) -> str | None: ...
    @property
    def trigger(self) -> str | None: ...
    @property
    def source(self) -> str | None: ...
