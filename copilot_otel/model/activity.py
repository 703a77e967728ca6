"""Neutral records of what an agent session did: the agent loop's output, before any vocabulary.

The agent loop (:mod:`copilot_otel.loop.agentloop`) turns session events into these records the moment each piece of
work is complete: a model call, a tool call, a turn, a sub-agent, a prompt, and the session-level facts around
them (start, resume, shutdown totals, errors, aborts, compactions, runaway detections). They say *what happened*
in the loop's own terms; nothing here names an OpenTelemetry attribute. The projections
(:mod:`copilot_otel.projections`) turn them into spans, log events and metric points in each vocabulary a backend
reads (GenAI semconv, ``github.copilot.*``, OpenInference, Langfuse, ours), and ``show`` and the library API read
them directly.

Identity travels with each record: the trace id of its prompt, its own span id and its parent's, all derived
deterministically from the session's ids (:mod:`copilot_otel.model.ids`), and ``source_offset``, the end of the log line
whose reading completed it (the daemon's checkpoints follow it).

Content fields (``input_text``, ``arguments_json``, ``result_text``, …) hold text that has already passed the
content gate (:class:`copilot_otel.settings.content.ContentGate`: allowed, scrubbed, cut), or ``None``; where it may go
(spans, details events) is the projections' decision.

Records are slotted; they are created by the hundred thousand during a backfill, so they are not frozen (a frozen
dataclass costs a ``object.__setattr__`` per field), but are never changed once made: treat them as read-only.
Like every record of the package they are declared with :func:`copilot_otel.model.records.record`.
The three made once per span (:class:`ModelCall`, :class:`ToolCall`, :class:`Turn`) are built positionally by the
loop, one commented argument a line: matching 15-28 keywords costs more than building the record. Their field
order is therefore part of their interface; add new fields at the end.
"""

from __future__ import annotations

import enum
from typing import Literal

from .records import RecordBase, record

__all__ = [
    "Abort",
    "AgentRun",
    "CloseReason",
    "Compaction",
    "Detection",
    "HookRun",
    "IncompleteReason",
    "InputMessage",
    "ModeChange",
    "ModelCall",
    "ModelTotals",
    "Note",
    "Notification",
    "Outcome",
    "PermissionWait",
    "PromptOutcome",
    "PromptRun",
    "PromptStarted",
    "Record",
    "RunawayRule",
    "SessionError",
    "SessionFacts",
    "SessionImported",
    "SessionResumed",
    "SessionShutdown",
    "SessionStarted",
    "SessionWarning",
    "SkillInvoked",
    "SubagentCall",
    "TaskComplete",
    "ToolCall",
    "ToolRequest",
    "Truncation",
    "Turn",
    "Usage",
    "UserMessage",
]


@record
class Usage(RecordBase):
    """Token/cost sums of model calls, kept per chat and summed per agent.

    Unknown is not zero: a count a usage record lacked or held out of range is ``None``, and so is every sum
    it is part of (a total missing a part is not the total). ``reasoning`` (reasoning output tokens, part of
    ``output``) is ``None`` until a call reports it; calls that do not are left out of its sum.
    """

    input: int | None = 0
    output: int | None = 0
    cache_read: int | None = 0
    cache_write: int | None = 0
    cost: float | None = 0.0
    nano_aiu: float = 0.0
    calls: int = 0
    reasoning: int | None = None

    def add(self, other: Usage) -> None:
        """Sum another call's usage into this one (a chat's records, an agent's chats)."""
        self.input = _plus(self.input, other.input)
        self.output = _plus(self.output, other.output)
        self.cache_read = _plus(self.cache_read, other.cache_read)
        self.cache_write = _plus(self.cache_write, other.cache_write)
        self.cost = None if self.cost is None or other.cost is None else self.cost + other.cost
        self.nano_aiu += other.nano_aiu
        self.calls += other.calls
        if other.reasoning is not None:
            self.reasoning = (self.reasoning or 0) + other.reasoning


def _plus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


class Outcome(str, enum.Enum):
    """How a span's work ended, in the loop's terms (the projections map it to a status)."""

    OK = "ok"
    ERROR = "error"
    CANCELLED = "cancelled"


# The loop's closed sets of words that leave it as they are (attribute values, metric labels, log bodies): literal
# strings, so what is exported is the string itself, and the type checker holds every producer and every reader
# (a comparison with a word not in the set is an error under mypy's strict equality) without a conversion at
# either end. typing.get_args lists each set.

PromptOutcome = Literal["completed", "incomplete", "error", "aborted"]
"""How a prompt ended: its work completed, was cut short (``incomplete_reason`` says why), failed (an error of the
main agent), or the user aborted it."""

RunawayRule = Literal["turns", "identical_tool_calls", "tool_errors", "burn_rate"]
"""The runaway rule that fired (:mod:`copilot_otel.loop.runaway`): too many turns, the same tool call repeated, tool
calls failing in a row, too many tokens in a minute."""

CloseReason = Literal[
    "file_ended",
    "file_truncated",
    "file_content_changed",
    "file_replaced",
    "file_deleted",
    "idle_timeout",
    "owner_exited",
]
"""Why the reader closes what a log left open (:meth:`copilot_otel.loop.agentloop.AgentLoop.close`): the file was read
to its end (replay, ``show``), the tailer saw it truncated, rewritten, replaced or deleted (``file_`` and the
tailer's reason), the session idled out, or the CLI process that wrote it exited."""

IncompleteReason = (
    CloseReason
    | Literal[
        "session_resumed",
        "session_shutdown",
        "prompt_closed",
        "agent_ended",
        "no_turn_end",
        "aborted",
        "restarted",
        "incomplete",
    ]
)
"""Why a span's work was cut short: the reader closed it (:data:`CloseReason`), or the log did: a new CLI process
resumed the session, it shut down with work open, the prompt or the agent ended first, a turn began without the
previous one's end, the user aborted, a tool call id started again, or (a sub-agent) nothing said why."""


# ---------------------------------------------------------------------------------------------- notes
# Things that happened during a prompt and belong on its root span as events (in order, capped).


@record
class UserMessage(RecordBase):
    """A user message: the one that opened the prompt, or one injected into it (autopilot, steering, skill)."""

    time_ns: int
    source: str
    interaction_id: str | None = None
    turn_id: str | None = None
    autopilot_continuation: bool = False
    content: str | None = None
    opening: bool = False


@record
class ModelTotals(RecordBase):
    """One model's line of ``session.shutdown``'s ``modelMetrics``."""

    model: str
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    requests: int | None


@record
class SessionShutdown(RecordBase):
    """``session.shutdown``: the session's cumulative totals, and what grew since they were last reported.

    The ``*_delta`` fields are what a counter should add now: totals are cumulative over a session's runs (a
    resumed session appends a second shutdown), so each run's growth is counted once.
    """

    session_id: str
    time_ns: int
    trace_id: int | None
    span_id: int | None
    shutdown_type: str | None
    premium_requests: float | None
    nano_aiu: float | None
    api_duration_ms: float | None
    lines_added: int
    lines_removed: int
    files_modified: int
    models: tuple[ModelTotals, ...]
    premium_delta: tuple[tuple[str, float], ...]
    nano_aiu_delta: tuple[tuple[str, float], ...]
    lines_added_delta: float
    lines_removed_delta: float
    source_offset: int


@record
class SessionError(RecordBase):
    """``session.error``: the CLI gave up (a model call failed after its retries, a query error)."""

    session_id: str
    time_ns: int
    trace_id: int | None
    span_id: int | None
    error_type: str
    message: str
    status_code: int | None
    source_offset: int


@record
class Abort(RecordBase):
    """``abort``: the user stopped the agent (Ctrl-C, cancel)."""

    session_id: str
    time_ns: int
    trace_id: int | None
    span_id: int | None
    reason: str
    source_offset: int


@record
class Compaction(RecordBase):
    """``session.compaction_start`` / ``_complete``: the CLI summarised the conversation to fit the context."""

    session_id: str
    time_ns: int
    trace_id: int | None
    span_id: int | None
    complete: bool
    trigger: str | None
    success: bool | None
    pre_tokens: int | None
    post_tokens: int | None
    tokens_removed: int | None
    messages_removed: int | None
    current_tokens: int | None
    token_limit: int | None
    source_offset: int


@record
class Truncation(RecordBase):
    """``session.truncation``: messages dropped to fit the context window."""

    time_ns: int
    token_limit: int | None
    pre_tokens: int | None
    post_tokens: int | None
    tokens_removed: int | None
    messages_removed: int | None


@record
class SkillInvoked(RecordBase):
    """``skill.invoked``."""

    time_ns: int
    name: str | None
    plugin_name: str | None
    trigger: str | None
    source: str | None = None  # where the skill was found: project, personal, plugin, ...


@record
class SessionWarning(RecordBase):
    """``session.warning``: something went wrong without stopping the session (``warning_type`` ``hook``: a hook
    crashed; ``interrupted_tools``: a killed CLI left tools unfinished). A note of the prompt it happened in."""

    session_id: str
    time_ns: int
    trace_id: int | None
    span_id: int | None
    warning_type: str
    message: str | None
    source_offset: int


@record
class SessionImported(RecordBase):
    """The part of a session ``copilot sessions import`` wrote: a conversation that ran elsewhere, not model calls.

    ``time_ns`` is the transcript's own date (``session.start.startTime``); ``imported_ns`` when the import ran
    (the time its events carry). Counts of what it holds; the real prompts after it are prompts as usual.
    """

    session_id: str
    time_ns: int
    imported_ns: int
    user_messages: int
    assistant_messages: int
    tool_calls: int
    source_offset: int


@record
class Detection(RecordBase):
    """A runaway rule fired (:mod:`copilot_otel.loop.runaway`).

    Attributes:
        reason: The rule: ``turns``, ``identical_tool_calls``, ``tool_errors`` or ``burn_rate``.
        threshold: The limit that was reached.
        tool_name, arguments_hash: What repeated (``identical_tool_calls``).
        tokens_last_minute: The tokens in the sliding minute (``burn_rate``).
        turns_total, tool_calls: The prompt's counts when it fired (set by the loop).
    """

    reason: RunawayRule
    time_ns: int
    threshold: int
    tool_name: str | None = None
    arguments_hash: str | None = None
    tokens_last_minute: int | None = None
    session_id: str = ""
    trace_id: int = 0
    span_id: int = 0
    turns_total: int = 0
    tool_calls: int = 0
    source_offset: int = 0


@record
class Notification(RecordBase):
    """``system.notification``: the CLI told the agent that background work finished (a sub-agent went idle, a
    background shell completed); the CLI then reads the result itself (``read_agent``, ``read_bash``)."""

    session_id: str
    time_ns: int
    trace_id: int | None
    span_id: int | None
    kind: str
    agent_id: str | None
    agent_type: str | None
    shell_id: str | None
    exit_code: int | None
    source_offset: int


@record
class TaskComplete(RecordBase):
    """``session.task_complete``: the agent declared its task done (how autopilot and plan mode end).

    ``summary`` is the agent's own words about the result: content, kept only when responses are captured.
    """

    session_id: str
    time_ns: int
    trace_id: int | None
    span_id: int | None
    success: bool | None
    outcome: str | None
    summary: str | None
    source_offset: int


@record
class ModeChange(RecordBase):
    """``session.mode_changed``: interactive, plan or autopilot (also in the middle of a prompt)."""

    session_id: str
    time_ns: int
    trace_id: int | None
    span_id: int | None
    previous: str | None
    new: str | None
    source_offset: int


Note = (
    UserMessage
    | SessionShutdown
    | SessionError
    | Abort
    | Compaction
    | Truncation
    | SkillInvoked
    | Detection
    | Notification
    | TaskComplete
    | ModeChange
    | SessionWarning
)


# ---------------------------------------------------------------------------------------------- work items


@record
class InputMessage(RecordBase):
    """Something a model call was the first to see: the user's (or a sub-agent's caller's) message, or a tool's
    result (``call_id`` set). ``text`` has passed the content gate."""

    text: str
    call_id: str | None = None


@record
class ToolRequest(RecordBase):
    """A tool call the model asked for in its answer (``assistant.message.toolRequests``)."""

    call_id: str | None
    name: str | None
    arguments_json: str | None


@record
class ModelCall(RecordBase):
    """One model call (one turn's chat, or a call outside any turn such as a compaction's).

    ``calls`` counts the usage records folded into it (0: no usage record, tokens estimated from the message).
    """

    session_id: str
    provider: str
    trace_id: int
    span_id: int
    parent_span_id: int
    start_ns: int
    end_ns: int
    model: str
    response_model: str
    response_id: str | None
    finish_reason: str | None
    usage: Usage
    calls: int
    ttft_ms: float | None
    server_ms: float | None
    initiator: str | None
    turn_id: str | None
    interaction_id: str | None
    agent_name: str | None
    origin: str | None
    outcome: Outcome
    error_type: str | None
    message: str | None
    input_messages: list[InputMessage]
    reasoning: list[str]
    output_text: str | None
    tool_requests: list[ToolRequest]
    source_offset: int
    # The reasoning effort the call was made with (--reasoning-effort, session.model_change), when set.
    reasoning_effort: str | None = None
    # A failed attempt of a call its CLI retried (or gave up on): the attempt's number (1 = the first retry's
    # cause); None for a call as answered or failed for good.
    attempt: int | None = None


@record
class SubagentCall(RecordBase):
    """A model call a sub-agent made in a log of its own (Claude Code's ``subagents/agent-<id>.jsonl``, a Codex
    thread's rollout, Gemini CLI's ``chats/<session>/<agent>.jsonl``), as the prompt that ran the sub-agent counts
    it: that log's own fold makes its span, and the prompt's root adds its cost, so the root costs its whole trace
    as a Copilot CLI prompt's does (whose sub-agents write into its own log). The fields are the call's
    :class:`ModelCall` ones that price it."""

    trace_id: int
    span_id: int
    provider: str
    model: str
    start_ns: int
    usage: Usage
    calls: int


@record
class ToolCall(RecordBase):
    """One tool execution, from ``tool.execution_start`` to its completion (or to what cut it short).

    ``completed`` is false when no ``tool.execution_complete`` was read (aborted, agent ended): the fields that
    only the completion carries are then unset.
    """

    session_id: str
    provider: str
    trace_id: int
    span_id: int
    parent_span_id: int
    call_id: str
    name: str
    start_ns: int
    end_ns: int
    description: str | None
    mcp_server: str | None
    arguments_hash: str
    agent_name: str | None
    success: bool
    error_type: str | None
    message: str | None
    incomplete_reason: IncompleteReason | None
    completed: bool
    exit_code: int | None
    user_requested: bool
    file_edits: int | None
    error_code: str | None
    arguments_json: str | None
    result_text: str | None
    source_offset: int
    # The CLI ran it on its own (reading a finished background agent or shell), not the model.
    cli_initiated: bool = False
    # Who refused the call when it was denied: ``preToolUse hook`` (a repository hook), else None (a rule or
    # the user, as the CLI's ``denied`` code says).
    denied_by: str | None = None
    # How long its pre/post tool hooks ran, inside the span (None: no hook ran); the tool's own time is the rest.
    hooks_s: float | None = None
    # Whether it ran under --sandbox, as its completion says (None: not said).
    sandboxed: bool | None = None
    # The CLI handed it to the process that registered the tool (an extension, an SDK client):
    # ``external_tool.requested``. The log does not name that process.
    external: bool = False


@record
class HookRun(RecordBase):
    """One hook run (``hook.start`` … ``hook.end``): under the tool call it decides on or follows (pre/post tool
    hooks), else under the prompt's root (session, prompt and agent-stop hooks).

    ``success`` false: it timed out or failed (``error_message`` says why, ``error_source`` which file).
    """

    session_id: str
    provider: str
    trace_id: int
    span_id: int
    parent_span_id: int
    start_ns: int
    end_ns: int
    invocation_id: str
    hook_type: str
    tool_call_id: str | None
    tool_name: str | None
    success: bool
    error_message: str | None
    error_source: str | None
    denied_calls: int
    incomplete_reason: IncompleteReason | None
    source_offset: int


@record
class PermissionWait(RecordBase):
    """The agent waited for the user to allow a tool (``permission.requested`` … ``permission.completed``).

    ``result`` is the CLI's answer kind (``approved``, ``denied-interactively-by-user``, …); ``incomplete_reason``
    is set when the log never said (aborted, file ended).
    """

    session_id: str
    provider: str
    trace_id: int
    span_id: int
    parent_span_id: int
    start_ns: int
    end_ns: int
    request_id: str
    kind: str | None
    tool_call_id: str | None
    tool_name: str | None
    result: str | None
    incomplete_reason: IncompleteReason | None
    source_offset: int


@record
class Turn(RecordBase):
    """One assistant turn (``assistant.turn_start`` to ``turn_end``; synthetic in logs without turn events)."""

    session_id: str
    provider: str
    trace_id: int
    span_id: int
    parent_span_id: int
    index: int
    turn_id: str | None
    interaction_id: str | None
    start_ns: int
    end_ns: int
    tool_calls: int
    agent_name: str | None
    synthetic: bool
    incomplete_reason: IncompleteReason | None
    source_offset: int


@record
class AgentRun(RecordBase):
    """A sub-agent's invocation, under the ``task`` tool call that started it."""

    session_id: str
    provider: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    start_ns: int
    end_ns: int
    name: str | None
    agent_id: str | None
    description: str | None
    display_name: str | None
    model: str | None
    task_call_id: str | None
    turn_count: int
    tool_calls: int
    usage: Usage
    background: bool
    total_tokens: int | None
    total_tool_calls: int | None
    input_text: str | None
    output_text: str | None
    system_text: str | None
    outcome: Outcome
    error_type: str | None
    status_message: str | None
    incomplete_reason: IncompleteReason | None
    source_offset: int


@record
class SessionFacts(RecordBase):
    """The session's context when a prompt ended (what every prompt's root carries)."""

    cli_version: str | None
    cwd: str | None
    repository: str | None
    branch: str | None
    head_commit: str | None
    git_root: str | None
    title: str | None
    system_prompt: str | None


@record
class PromptRun(RecordBase):
    """One prompt: one trace, from the user message (or the first activity) to where its work ended.

    ``outcome`` is ``completed``, ``incomplete``, ``error`` or ``aborted``; ``notes`` are what happened during it
    that belongs on its root span (at most a cap; ``dropped_notes`` counts the rest).
    """

    session_id: str
    provider: str
    trace_id: int
    span_id: int
    start_ns: int
    end_ns: int
    model: str | None
    turn_count: int
    turns_total: int
    tool_calls: int
    outcome: PromptOutcome
    usage: Usage
    last_finish_reason: str | None
    interaction_id: str | None
    facts: SessionFacts
    agent_mode: str | None
    human: bool
    input_text: str | None
    output_text: str | None
    error: bool
    error_type: str | None
    status_message: str | None
    incomplete_reason: IncompleteReason | None
    notes: list[Note]
    dropped_notes: int
    source_offset: int
    # The main agent when it is a custom one (``copilot --agent <name>``); None for the built-in agent.
    agent_name: str | None = None
    reasoning_effort: str | None = None
    # The prompt continues another trace's (a forked session's first prompt: its parent's), as (trace id, root
    # span id); ``copied_records``: the records of that history the log held again, skipped.
    continues: tuple[int, int] | None = None
    copied_records: int = 0
    # The model calls its sub-agents made in logs of their own (``SubagentCall``), and how many of those sub-agents'
    # logs could not be read (gone, refused): the root's cost leaves those out, and says so. Not the fold's: the
    # pipeline reads those logs when the prompt ends (copilot_otel.pipeline.subagents) and fills these in.
    subagent_calls: tuple[SubagentCall, ...] = ()
    subagents_unread: int = 0
    # Its sub-agents still running when it ended (a background one that had not reported when the user went on):
    # their calls are counted as far as their logs got then.
    subagents_running: int = 0


# ---------------------------------------------------------------------------------------------- session events


@record
class SessionStarted(RecordBase):
    """``session.start``."""

    session_id: str
    time_ns: int
    cli_version: str | None
    model: str | None
    source_offset: int


@record
class SessionResumed(RecordBase):
    """``session.resume``: a later run of the CLI continues the session in the same log."""

    session_id: str
    time_ns: int
    source_offset: int


@record
class PromptStarted(RecordBase):
    """A human prompt began (its trace's first moment, for the live view and log events)."""

    session_id: str
    time_ns: int
    trace_id: int
    span_id: int
    index: int
    interaction_id: str | None
    delivery: str | None
    source_offset: int


@record
class SelfReport(RecordBase):
    """What the CLI itself says of its session (Claude Code: ``custom-title``, ``cost-state``), for ``show`` and
    ``report`` to put beside our own figures: the name the user gave it and the CLI's own accounting (cumulative;
    the last one read stands). Nothing of it is exported: the title reaches the spans only through
    :class:`SessionFacts` (content, gated like Copilot CLI's), and the CLI's cost is its claim, not ours.

    ``model_costs``: each model's cost in USD as the CLI counts it; durations in ms.
    """

    session_id: str
    time_ns: int
    title: str | None
    cost_usd: float | None
    api_duration_ms: float | None
    api_duration_without_retries_ms: float | None
    tool_duration_ms: float | None
    duration_ms: float | None
    model_costs: tuple[tuple[str, float], ...]
    source_offset: int


Record = (
    SessionStarted
    | SessionResumed
    | SessionShutdown
    | SessionError
    | Abort
    | Compaction
    | PromptStarted
    | Detection
    | Notification
    | TaskComplete
    | ModeChange
    | ModelCall
    | ToolCall
    | HookRun
    | SessionWarning
    | SessionImported
    | PermissionWait
    | Turn
    | AgentRun
    | PromptRun
    | SelfReport
)
