"""The fold's mutable state between events: what :class:`~copilot_otel.loop.agentloop.AgentLoop` keeps open.

A session log is folded one event at a time, so everything a span needs before it can be emitted (a turn's model
call, a tool's start, an agent's token sums, a prompt's runaway counters) waits in these records until the event
that completes it arrives. They live apart from the fold's event handlers so that the state can be read on its
own: what a prompt holds, and what a checkpoint keeps of it.

Only :class:`SessionContext` outlives a prompt. It is small and serialisable (:meth:`SessionContext.to_dict`,
which writes its schema version, :data:`CONTEXT_VERSION`), and it is what the live daemon checkpoints; the per-prompt records (:class:`Prompt` and what hangs off it) are
never saved but rebuilt by re-folding the log from the oldest open prompt's first line, which gives the same
records because ids and timestamps come only from the events.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from ..model.activity import IncompleteReason, InputMessage, Note, Outcome, PromptOutcome, RunawayRule, Usage
from ..model.inputs import ToolRequest
from ..model.records import RecordBase, field_names, record

# The SDK and most backends cap span events at 128; a runaway autopilot loop can inject thousands of
# messages, so we keep the first ones and count the rest.
MAX_SPAN_EVENTS = 128


@record
class Chat(RecordBase):
    """The model call of one turn, built from usage records and assistant messages."""

    usage: Usage = field(default_factory=Usage)
    records: int = 0
    model: str | None = None
    response_model: str | None = None
    response_id: str | None = None
    finish_reason: str | None = None
    ttft_ms: float | None = None
    server_ms: float | None = None
    initiator: str | None = None
    reasoning_effort: str | None = None  # as the call's usage record says
    end_ns: int | None = None
    message_text: list[str] = field(default_factory=list)
    reasoning_text: list[str] = field(default_factory=list)  # captured only with the reasoning switch
    asked_for_tools: bool = False  # the model's answer asked for tool calls
    tool_requests: list[ToolRequest] = field(
        default_factory=list
    )  # those calls, kept only with their content
    emitted: bool = False
    # Captured messages the call sent that no earlier call of its agent did (gen_ai.input.messages); empty
    # unless content capture is on.
    input_messages: list[InputMessage] = field(default_factory=list)


@record
class Turn(RecordBase):
    """One assistant turn (``turn_start`` to ``turn_end``, or a synthetic one in logs without turn events)."""

    span_id: int
    index: int
    turn_id: str | None
    interaction_id: str | None
    start_ns: int
    synthetic: bool
    chat: Chat = field(default_factory=Chat)
    last_ns: int = 0
    tool_calls: int = 0


@record
class Tool(RecordBase):
    """A tool execution started and not yet completed; its span is emitted on ``tool.execution_complete``."""

    span_id: int
    parent_span_id: int
    call_id: str
    name: str
    start_ns: int
    arguments: Any
    args_hash: str
    mcp_server: str | None
    agent: Agent
    description: str | None = None
    cli_initiated: bool = False  # the CLI's own call (reading finished background work), not the model's
    denied_by: str | None = None  # who refused it: "preToolUse hook" (a hook's output), or as the source says
    hooks_ns: int = 0  # time its pre/post hooks ran (inside its span)
    external: bool = False  # run by an extension or SDK client (external_tool.requested)


@record
class Hook(RecordBase):
    """A hook run between its ``hook.start`` and ``hook.end`` (or, before any prompt, until one opens)."""

    invocation_id: str
    hook_type: str
    start_ns: int
    offset: int  # of its hook.start line (a prompt it waits for starts its re-fold there)
    tool_call_id: str | None = None
    tool_name: str | None = None
    parent_span_id: int | None = None  # None while it waits for a prompt
    end_ns: int | None = None
    success: bool = True
    error_message: str | None = None
    error_source: str | None = None
    denied_calls: int = 0


@record
class Agent(RecordBase):
    """An agent invocation: the prompt's main agent (root span) or a sub-agent."""

    span_id: int
    parent_span_id: int | None
    name: str | None
    start_ns: int
    agent_id: str | None = None
    task_call_id: str | None = None
    description: str | None = None
    display_name: str | None = None
    model: str | None = None
    turn: Turn | None = None
    turn_count: int = 0
    uses_turn_events: bool = False
    usage: Usage = field(default_factory=Usage)
    last_finish_reason: str | None = None
    last_ns: int = 0
    tool_calls: int = 0
    background: bool = False
    closed: bool = False
    status: Outcome = Outcome.OK
    error_type: str | None = None
    status_message: str | None = None
    input_text: str | None = None
    output_text: str | None = None
    system_text: str | None = None  # a sub-agent's system prompt, captured only with its own switch
    # Captured messages (the prompt, tool results) that arrived since this agent's last model call: the log
    # has no record of what each call sent, so the next turn's chat takes these as its input messages.
    pending_input: list[InputMessage] = field(default_factory=list)


@record
class Prompt(RecordBase):
    """One prompt (one trace) while it is open: its agents, open tools, root span events, runaway counters.

    Never checkpointed: a restart rebuilds it by re-folding from ``start_offset`` with ``context_at_open``.
    """

    key: str
    trace_id: int
    root: Agent
    start_ns: int
    start_offset: int
    interaction_id: str | None
    human: bool
    agent_mode: str | None = None
    notes: list[Note] = field(default_factory=list)
    dropped_notes: int = 0
    end_ns: int = 0
    outcome: PromptOutcome = "completed"
    incomplete_reason: IncompleteReason | None = None
    tool_calls: int = 0
    turns_total: int = 0
    agents: dict[str, Agent] = field(default_factory=dict)
    tools: dict[str, Tool] = field(default_factory=dict)
    # runaway state
    last_call: tuple[str, str] | None = None
    identical_streak: int = 0
    error_streak: int = 0
    fired: set[RunawayRule] = field(default_factory=set)
    identical_armed: bool = True
    errors_armed: bool = True
    token_window: deque[tuple[int, int]] = field(default_factory=deque)
    token_window_sum: int = 0
    last_ns: int = 0
    used_keys: dict[str, int] = field(default_factory=dict)
    context_at_open: dict[str, Any] = field(default_factory=dict)
    # permission requests not yet answered: requestId → (tool call id, kind, requested at)
    permissions: dict[str, tuple[str | None, str | None, int]] = field(default_factory=dict)
    hooks: dict[str, Hook] = field(default_factory=dict)  # hook runs not yet ended, by invocation id
    # Loop rule A: the fold of a sub-agent's own file, rooted under the tool call that started it in another fold's
    # trace: its root is that sub-agent, handed on as an AgentRun, and there is no PromptRun.
    rooted: bool = False
    # It continues another trace (a fork's first prompt: its parent's): (trace id, root span id), and the records
    # of that history its log held again (skipped).
    continues: tuple[int, int] | None = None
    copied_records: int = 0

    def add_note(self, note: Note) -> None:
        """Note what happened during the prompt (its root span's events), counting those past :data:`MAX_SPAN_EVENTS`."""
        if len(self.notes) < MAX_SPAN_EVENTS:
            self.notes.append(note)
        else:
            self.dropped_notes += 1


# The checkpointed context's schema version (its ``version`` key). A checkpoint outlives the copilot-otel that
# wrote it, so the schema is this number, not the field names of the day: version 0 is the context as stored
# before it had one (no ``version`` key; the fields of version 1).
CONTEXT_VERSION = 1
# How a context of each older version becomes one of the next (a field renamed or retyped is a step here; one
# added needs none, its default fills it in), so that every older checkpoint still restores.
_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    0: lambda data: data,  # the unversioned context: the same fields
}


@record
class SessionContext(RecordBase):
    """Session-level facts that every root span carries; small and serialisable for checkpoints."""

    session_id: str
    copilot_version: str | None = None
    producer: str | None = None
    cwd: str | None = None
    git_root: str | None = None
    repository: str | None = None
    branch: str | None = None
    head_commit: str | None = None
    model: str | None = None
    mode: str | None = None  # interactive, plan or autopilot (session.mode_changed)
    provider: str | None = None
    title: str | None = None
    # The root agent's latest system prompt, captured only with its own switch; kept in the context because old
    # logs write it once, before the first prompt.
    system_prompt: str | None = None
    saw_usage_records: bool = False
    # The main agent when custom (``copilot --agent``: subagent.selected before the first prompt).
    agent_name: str | None = None
    reasoning_effort: str | None = None
    # While a log's imported part (``copilot sessions import``) is read: what it held so far (see AgentLoop).
    imported: dict[str, int] = field(default_factory=dict)
    prompts_started: int = 0
    last_event_ns: int = 0
    last_prompt_event_id: str | None = None
    prompt_id_repeats: int = 0
    # session.shutdown totals are cumulative over a session's runs (resume appends); what was already counted
    reported_totals: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy with its schema version (checkpoints keep it while the fold moves on)."""
        data: dict[str, Any] = {"version": CONTEXT_VERSION}
        for name in field_names(self):
            value = getattr(self, name)
            data[name] = dict(value) if isinstance(value, dict) else value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionContext:
        """The context from a checkpoint's :meth:`to_dict` copy, of this version or an older one (upgraded step by
        step; no ``version``: the unversioned context of older releases). A newer version's context (a
        downgrade) gives the fields this version knows; keys it does not know are ignored."""
        upgraded = dict(data)
        version = upgraded.pop("version", 0)
        while version in _UPGRADES:
            upgraded = _UPGRADES[version](upgraded)
            version += 1
        known_names = field_names(cls)
        known: dict[str, Any] = {
            k: dict(v) if isinstance(v, dict) else v for k, v in upgraded.items() if k in known_names
        }
        return cls(**known)
