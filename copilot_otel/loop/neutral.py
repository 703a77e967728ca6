"""Neutral events: the loop's inputs as plain records, for sources other than Copilot CLI.

Another source does not build Copilot's views (they decode Copilot's camelCase): its framer (in its own module
under :mod:`copilot_otel.sources`) turns that source's records into these, which satisfy the protocols of
:mod:`copilot_otel.model.inputs`, and :data:`NEUTRAL` is their translator over the same entity handlers Copilot's
events reach (:mod:`copilot_otel.sources.copilot.translator`). Each is an :class:`~copilot_otel.model.inputs.Event`
for its envelope (id, time, offsets, the agent it belongs to) with an empty ``data`` (:data:`NO_DATA`): everything
a handler reads is a field of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..model.inputs import CompactionCall, Context, Envelope, Event, ToolRequest, Usage
from ..model.records import record
from . import agents, notes, prompts, session, tools, turns
from .core import LoopState, Translator

__all__ = [
    "NEUTRAL",
    "NO_DATA",
    "Aborted",
    "Answered",
    "AttemptFailed",
    "CallUsage",
    "Compacted",
    "Continued",
    "Failed",
    "PromptEnded",
    "PromptSubmitted",
    "RootEnded",
    "Rooted",
    "SelfReported",
    "SessionBegan",
    "SpawnEnded",
    "Spawned",
    "SubagentDone",
    "ToolBegan",
    "ToolEnded",
    "TurnBegan",
    "TurnEnded",
    "end_held_at",
    "prompt_end",
]

# The ``data`` of every neutral event: its fields say everything (never mutated).
NO_DATA: Mapping[str, Any] = {}


@record
class SessionBegan(Event):
    session_id: str | None = None
    copilot_version: str | None = None
    producer: str | None = None
    selected_model: str | None = None
    reasoning_effort: str | None = None
    start_time: str | None = None
    context: Context | None = None


@record
class PromptSubmitted(Event):
    content: Any = None
    source: str | None = None
    delivery: str | None = None
    turn_id: str | None = None
    agent_mode: str | None = None
    autopilot_continuation: bool = False


@record
class TurnBegan(Event):
    turn_id: str | None = None


@record
class TurnEnded(Event):
    turn_id: str | None = None


@record
class CallUsage(Event):
    usage: Usage | None = None


@record
class Answered(Event):
    turn_id: str | None = None
    model: str | None = None
    api_call_id: str | None = None
    output_tokens: int | None = None
    content: Any = None
    reasoning_text: Any = None
    tool_requests: tuple[ToolRequest, ...] = ()

    @property
    def has_tool_requests(self) -> bool:
        return bool(self.tool_requests)

    @property
    def has_model_call_ids(self) -> bool:
        return bool(self.model or self.api_call_id or self.turn_id)


@record
class ToolBegan(Event):
    call_id: str | None = None
    name: str | None = None
    arguments: Any = None
    mcp_server: str | None = None
    description: str | None = None


@record
class ToolEnded(Event):
    call_id: str | None = None
    success: bool = True
    error_code: str | None = None
    error_message: str | None = None
    exit_code: int | None = None
    user_requested: bool = False
    result: Any = None
    sandboxed: bool | None = None
    file_edits: int | None = None
    denied_by: str | None = None


@record
class Compacted(Event):
    complete: bool = True
    trigger: str | None = None
    success: bool | None = True
    pre_tokens: int | None = None
    post_tokens: int | None = None
    tokens_removed: int | None = None
    messages_removed: int | None = None
    current_tokens: int | None = None
    token_limit: int | None = None
    call: CompactionCall | None = None


@record
class Aborted(Event):
    reason: str | None = None


@record
class Failed(Event):
    error_type: str | None = None
    message: str | None = None
    status_code: int | None = None


@record
class AttemptFailed(Event):
    """One failed attempt of a model call that the source retries (or gives up on: a :class:`Failed` follows): an
    ERROR model call of its own from ``start_ns`` (its request) to the event, under the turn of the call it is an
    attempt of (:func:`.turns.on_attempt_failed`); ``error_type`` the HTTP status when there is one."""

    start_ns: int = 0
    model: str | None = None
    error_type: str | None = None
    message: str | None = None
    status_code: int | None = None
    attempt: int | None = None


@record
class Rooted(Event):
    """Loop rule A: this log is a sub-agent's, rooted in another fold's span (see :func:`.prompts.on_rooted`).

    ``parent_span_id`` is the span the sub-agent hangs under. When it equals the root's own span id
    (``ids.span_id(session_id, "agent", agent_key)``), the agent span itself is the other fold's (Codex: the
    parent's fold hands on the :class:`~copilot_otel.model.activity.AgentRun` under its ``spawn_agent`` call, see
    :class:`Spawned`): this fold hangs its turns under that span and hands on no run of its own.
    """

    session_id: str | None = None
    prompt_key: str = ""
    agent_key: str = ""
    parent_span_id: int = 0
    task_call_id: str | None = None
    name: str | None = None
    description: str | None = None
    content: Any = None


@record
class Continued(Event):
    """The prompt just opened continues another trace's work (a forked session's first prompt continues the
    parent's prompt it was forked from): its root links to that trace's root span (``trace_id``, ``span_id``; 0
    when the parent is not known), and ``copied_records`` says how much of that history the log held again,
    skipped rather than folded (:func:`.prompts.on_continued`)."""

    trace_id: int = 0
    span_id: int = 0
    copied_records: int = 0


@record
class SelfReported(Event):
    """What the CLI says of its own session (:func:`.session.on_self_report`): the title the user gave it, and/or
    its own running accounting (cost in USD, API and tool time in ms, each model's cost)."""

    title: str | None = None
    cost_usd: float | None = None
    api_duration_ms: float | None = None
    api_duration_without_retries_ms: float | None = None
    tool_duration_ms: float | None = None
    duration_ms: float | None = None
    model_costs: tuple[tuple[str, float], ...] = ()


@record
class RootEnded(Event):
    pass


@record
class PromptEnded(Event):
    """The source says the prompt's work is over (Codex: ``task_complete`` / ``turn_aborted``; Claude Code and
    Gemini CLI: the final answer): it closes there, complete, instead of waiting for the next prompt or the log's
    end."""


@record
class Spawned(Event):
    """Loop rule A, the parent's side: a sub-agent whose work is in a log of its own was started by the tool call
    ``task_call_id``. The parent's fold opens its agent span under that call, with an id the sub-agent's log can
    compute (``ids.span_id(session, "agent", agent_key)``), and hands on its run when :class:`SpawnEnded` (or
    the prompt's end) closes it."""

    agent_key: str = ""
    task_call_id: str | None = None
    name: str | None = None
    model: str | None = None
    content: Any = None


@record
class SpawnEnded(Event):
    """The sub-agent ``agent_key`` of a :class:`Spawned` is done; ``error_type`` set when it did not complete."""

    agent_key: str = ""
    error_type: str | None = None


@record
class SubagentDone(Event):
    """A sub-agent whose work is in a log of its own is done (Claude Code: its ``Agent`` call's result, or its
    background task's report; Codex: its thread's final state; Gemini CLI: its ``invoke_agent`` call's end).

    Not the loop's: the pipeline takes it (:mod:`copilot_otel.pipeline.subagents`) and, when the prompt it ran in
    ends, reads the log it names (``log``: what its source's ``subagent_log`` finds it by, beside the parent's log)
    for the calls its root's cost adds. The fold reads no file, and has nothing to do with it. ``running``: the
    sub-agent still ran when its prompt ended (the user went on before a background sub-agent reported): its log is
    read as far as it got, and the root says so.
    """

    log: str = ""
    running: bool = False


def end_held_at(event: Event, time_ns: int | None = None) -> dict[str, Any]:
    """A prompt's end seen at ``event`` (dated ``time_ns``, else the event's) but held until the log shows it is one,
    as plain JSON values for a framer's snapshot; :func:`prompt_end` makes it the event."""
    return {"id": event.id, "time_ns": event.time_ns if time_ns is None else time_ns, "offset": event.offset,
            "end_offset": event.end_offset}  # fmt: skip


def prompt_end(kind: str, held: Mapping[str, Any]) -> PromptEnded:
    """The :class:`PromptEnded` of an end held by :func:`end_held_at`."""
    return PromptEnded(kind, f"prompt-end/{held['id']}", held["time_ns"], NO_DATA, None, held["offset"],
                       held["end_offset"])  # fmt: skip


def on_prompt_end(loop: LoopState, event: Envelope) -> None:
    """:class:`PromptEnded`: the current prompt closes at the event, complete (a rooted one as
    :class:`RootEnded` closes it)."""
    prompt = loop.current
    if prompt is not None:
        loop.touch(prompt, prompt.root, event.time_ns)
        prompts.close_prompt(loop, prompt, event.time_ns, None, incomplete=False)


# The translator of the neutral events: the same handlers Copilot's events reach (sources/copilot/translator.py).
NEUTRAL = Translator(
    handlers={
        SessionBegan: session.on_session_start,
        PromptSubmitted: prompts.on_user_message,
        TurnBegan: turns.on_turn_start,
        TurnEnded: turns.on_turn_end,
        CallUsage: turns.on_usage_record,
        Answered: turns.on_assistant_message,
        ToolBegan: tools.on_tool_start,
        ToolEnded: tools.on_tool_complete,
        Compacted: notes.COMPACTION,
        Aborted: notes.ABORT,
        Failed: notes.ERROR,
        AttemptFailed: turns.on_attempt_failed,
        Continued: prompts.on_continued,
        SelfReported: session.on_self_report,
        Rooted: prompts.on_rooted,
        RootEnded: prompts.on_rooted_end,
        PromptEnded: on_prompt_end,
        Spawned: agents.on_spawned,
        SpawnEnded: agents.on_spawn_ended,
    },
    keeps_unanswered=frozenset({Failed, Aborted, Compacted}),
)

if TYPE_CHECKING:  # each neutral event is the input its handler reads: mypy checks it against its protocol.
    from ..model import inputs

    def _neutral_are_inputs(
        start: SessionBegan,
        prompt: PromptSubmitted,
        turn: TurnBegan,
        turn_end: TurnEnded,
        usage: CallUsage,
        answer: Answered,
        tool: ToolBegan,
        done: ToolEnded,
        compaction: Compacted,
        abort: Aborted,
        error: Failed,
        rooted: Rooted,
        root_ended: RootEnded,
        spawned: Spawned,
        spawn_ended: SpawnEnded,
        attempt: AttemptFailed,
        continued: Continued,
        reported: SelfReported,
    ) -> None:
        __: tuple[
            agents.SpawnInput,
            agents.SpawnEndInput,
            inputs.AttemptInput,
            inputs.ContinuedInput,
            inputs.SelfReportInput,
        ] = (spawned, spawn_ended, attempt, continued, reported)
        _: tuple[
            inputs.SessionStartInput,
            inputs.PromptInput,
            inputs.TurnInput,
            inputs.TurnInput,
            inputs.UsageInput,
            inputs.AnswerInput,
            inputs.ToolStartInput,
            inputs.ToolEndInput,
            inputs.CompactionInput,
            inputs.AbortInput,
            inputs.ErrorInput,
            inputs.RootedInput,
            inputs.Envelope,
        ] = (
            start,
            prompt,
            turn,
            turn_end,
            usage,
            answer,
            tool,
            done,
            compaction,
            abort,
            error,
            rooted,
            root_ended,
        )
