"""What the CLI says along the way: notifications, completions, mode changes, skills, compaction, abort, errors.

Each of these is a note on the prompt it happens in (an event on its root span) and, most of them, a record of
its own (a log event), also with no prompt open. They differ only in a few choices, so they are one helper
(:class:`NoteRule`, called as the event's handler) and one rule per kind of note (:data:`COMPACTION`, …) of those choices: where the note
goes, whether it is activity, whether it is handed on alone, and the little more a few of them do (an abort
cancels what runs, an error fails the model call it answers, a compaction has a model call of its own, a
user-invoked skill waits for the prompt it belongs to).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..model.activity import (
    Abort,
    Compaction,
    ModeChange,
    Notification,
    Outcome,
    SessionError,
    SessionWarning,
    SkillInvoked,
    TaskComplete,
    Truncation,
    Usage,
)
from ..model.inputs import (
    AbortInput,
    CompactionInput,
    Envelope,
    ErrorInput,
    ModeChangeInput,
    NotificationInput,
    SkillInput,
    TaskCompleteInput,
    TruncationInput,
    WarningInput,
)
from ..settings.content import ContentKind
from .core import LoopState
from .foldstate import Agent, Prompt

__all__ = [
    "ABORT",
    "COMPACTION",
    "ERROR",
    "MODE_CHANGE",
    "NOTIFICATION",
    "SKILL",
    "TASK_COMPLETE",
    "TRUNCATION",
    "WARNING",
    "NoteRule",
]

E = TypeVar("E", bound=Envelope)
R = TypeVar("R")


def _current(loop: LoopState, event: Envelope) -> tuple[Prompt, Agent] | None:
    """The note belongs to the prompt under way, on its main agent (none open: no prompt)."""
    prompt = loop.current
    return (prompt, prompt.root) if prompt is not None else None


def _always(record: object) -> bool:
    return True


def _never(record: object) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class NoteRule(Generic[E, R]):
    """How one kind of note is folded; the rule is the handler of its event class.

    Attributes:
        make: The note's record from its event (``prompt``: where it goes, ``None`` with none).
        place: Which prompt and agent it belongs to, or ``None``.
        touch: It is activity: its prompt and agent last at least until it.
        hand_on: Whether the record is handed on as a record of its own (else it is only noted).
        effect: What it says of the session, with or without a prompt.
        settle: What else it does to its prompt, before it is handed on.
        follow: What it brings after it is handed on.
        alone: Whether it is anything with no prompt open (then it is not even read).
        wait: With no prompt, where it waits for the next one (else it is handed on alone).
    """

    make: Callable[[LoopState, E, Prompt | None], R]
    place: Callable[[LoopState, E], tuple[Prompt, Agent] | None] = _current
    touch: bool = True
    hand_on: Callable[[R], bool] = _always
    effect: Callable[[LoopState, E, R], None] | None = None
    settle: Callable[[LoopState, E, Prompt, Agent, R], None] | None = None
    follow: Callable[[LoopState, E, Prompt, Agent], None] | None = None
    alone: bool = True
    wait: Callable[[LoopState, E, R], None] | None = None

    def __call__(self, loop: LoopState, event: E) -> None:
        placed = self.place(loop, event)
        if placed is None and not self.alone:
            return
        record = self.make(loop, event, placed[0] if placed is not None else None)
        if self.effect is not None:
            self.effect(loop, event, record)
        if placed is None:
            if self.wait is not None:
                self.wait(loop, event, record)
            elif self.hand_on(record):
                loop.out.append(record)  # type: ignore[arg-type]  # every R handed on is a Record
            return
        prompt, agent = placed
        if self.touch:
            loop.touch(prompt, agent, event.time_ns)
        prompt.add_note(record)  # type: ignore[arg-type]  # every R is a Note
        if self.settle is not None:
            self.settle(loop, event, prompt, agent, record)
        if self.hand_on(record):
            loop.out.append(record)  # type: ignore[arg-type]
            if self.follow is not None:
                self.follow(loop, event, prompt, agent)


def _where(loop: LoopState, event: Envelope, prompt: Prompt | None) -> dict[str, Any]:
    """The fields every note record has: its session and time, the trace and root span it is on (none without
    a prompt), the line it was read from."""
    return {
        "session_id": loop.ctx.session_id,
        "time_ns": event.time_ns,
        "trace_id": prompt.trace_id if prompt is not None else None,
        "span_id": prompt.root.span_id if prompt is not None else None,
        "source_offset": loop.offset,
    }


# ---------------------------------------------------------------------------------------------- records
def _notification(loop: LoopState, event: NotificationInput, prompt: Prompt | None) -> Notification:
    return Notification(
        **_where(loop, event, prompt),
        kind=event.kind or "unknown",
        agent_id=event.notified_agent_id,
        agent_type=event.agent_type,
        shell_id=event.shell_id,
        exit_code=event.exit_code,
    )


def _notified(loop: LoopState, event: NotificationInput, record: Notification) -> None:
    # Background work finished; addressed to the agent that owns the envelope (the main agent when absent): the
    # CLI's next message for it is its own (see turns.on_assistant_message).
    loop.notified.add(event.agent_id)


def _task_complete(loop: LoopState, event: TaskCompleteInput, prompt: Prompt | None) -> TaskComplete:
    return TaskComplete(
        **_where(loop, event, prompt),
        success=event.success,
        outcome=event.outcome,
        summary=loop.gate.text(event.summary, ContentKind.RESPONSES),
    )


def _mode_change(loop: LoopState, event: ModeChangeInput, prompt: Prompt | None) -> ModeChange:
    return ModeChange(
        **_where(loop, event, prompt),
        previous=event.previous,
        new=event.new,
    )


def _mode(loop: LoopState, event: ModeChangeInput, record: ModeChange) -> None:
    loop.ctx.mode = record.new or loop.ctx.mode  # the next prompts' agent mode


def _warning(loop: LoopState, event: WarningInput, prompt: Prompt | None) -> SessionWarning:
    return SessionWarning(
        **_where(loop, event, prompt),
        warning_type=event.warning_type or "unknown",
        message=event.message,
    )


def _truncation(loop: LoopState, event: TruncationInput, prompt: Prompt | None) -> Truncation:
    return Truncation(
        time_ns=event.time_ns,
        token_limit=event.token_limit,
        pre_tokens=event.pre_tokens,
        post_tokens=event.post_tokens,
        tokens_removed=event.tokens_removed,
        messages_removed=event.messages_removed,
    )


# ---------------------------------------------------------------------------------------------- skills
def _skill(loop: LoopState, event: SkillInput, prompt: Prompt | None) -> SkillInvoked:
    return SkillInvoked(event.time_ns, event.name, event.plugin, event.trigger, event.source)


def _skill_place(loop: LoopState, event: SkillInput) -> tuple[Prompt, Agent] | None:
    # Typed as /<skill>: written before the user.message it belongs to (the next prompt takes it).
    return None if event.trigger == "user-invoked" else _current(loop, event)


def _skill_waits(loop: LoopState, event: SkillInput, record: SkillInvoked) -> None:
    loop.pending_notes.append((event.offset, record))
    loop.hold(event)


# ---------------------------------------------------------------------------------------------- compaction
def _compaction_place(loop: LoopState, event: CompactionInput) -> tuple[Prompt, Agent]:
    # A compaction outside any prompt (/compact) is work of its own: it gets a trace (not a human prompt).
    prompt = loop.current or loop.ensure_prompt(event)
    return prompt, prompt.root


def _compaction(loop: LoopState, event: CompactionInput, prompt: Prompt | None) -> Compaction:
    return Compaction(
        **_where(loop, event, prompt),
        complete=event.complete,
        trigger=event.trigger,
        success=event.success,
        pre_tokens=event.pre_tokens,
        post_tokens=event.post_tokens,
        tokens_removed=event.tokens_removed,
        messages_removed=event.messages_removed,
        current_tokens=event.current_tokens,
        token_limit=event.token_limit,
    )


def _compaction_call(loop: LoopState, event: CompactionInput, prompt: Prompt, agent: Agent) -> None:
    """The compaction's own model call: the CLI writes no usage record for it, only these totals."""
    call = event.call
    if call is None:
        return
    usage = Usage(
        input=call.input_tokens,
        output=call.output_tokens,
        cache_read=call.cache_read_tokens,
        cache_write=call.cache_write_tokens,
        calls=1,
    )
    owner = prompt.root if event.agent_id is None else loop.route(event)[1]
    loop.standalone_chat(
        prompt, owner, event, usage, call.model or loop.ctx.model, call.duration_ms, "compaction"
    )


# ---------------------------------------------------------------------------------------------- abort
def _abort(loop: LoopState, event: AbortInput, prompt: Prompt | None) -> Abort:
    return Abort(
        **_where(loop, event, prompt),
        reason=event.reason or "unknown",
    )


def _aborted(loop: LoopState, event: AbortInput, prompt: Prompt, agent: Agent, record: Abort) -> None:
    """The user stopped the prompt: everything still running was cancelled (tools, pending model calls)."""
    prompt.outcome = "aborted"
    prompt.incomplete_reason = "aborted"
    # A call the user cut (its turn already ended, unanswered) was cancelled, not left without a response.
    loop.flush_unanswered(prompt, Outcome.CANCELLED)
    for running in [prompt.root, *prompt.agents.values()]:
        if running.closed:
            continue
        turn = running.turn
        if turn is not None and not turn.chat.emitted:
            loop.emit_chat(prompt, running, turn, event.time_ns, Outcome.CANCELLED, None, None)
    for call_id, tool in list(prompt.tools.items()):
        loop.end_tool(
            prompt,
            tool,
            event.time_ns,
            success=False,
            error_type="cancelled",
            message="Operation aborted",
            incomplete="aborted",
        )
        del prompt.tools[call_id]
    prompt.root.status = Outcome.ERROR
    prompt.root.error_type = "cancelled"
    prompt.root.status_message = f"aborted: {record.reason}"


# ---------------------------------------------------------------------------------------------- errors
def _error_place(loop: LoopState, event: ErrorInput) -> tuple[Prompt, Agent] | None:
    return loop.route(event) if (event.agent_id or loop.current) else None


def _error(loop: LoopState, event: ErrorInput, prompt: Prompt | None) -> SessionError:
    error_type = event.error_type or "error"
    return SessionError(
        **_where(loop, event, prompt),
        error_type=error_type,
        message=event.message or error_type,
        status_code=event.status_code,
    )


def _failed(loop: LoopState, event: ErrorInput, prompt: Prompt, agent: Agent, record: SessionError) -> None:
    """The error answers the agent's model call in progress (or one that ended unanswered): it failed."""
    # The provider's HTTP status is the failed call's error.type, as the semconv for HTTP errors has it.
    failure = str(record.status_code) if record.status_code is not None else record.error_type
    message = record.message
    turn = agent.turn
    if turn is not None and not turn.chat.emitted:
        loop.emit_chat(prompt, agent, turn, event.time_ns, Outcome.ERROR, failure, message)
    loop.flush_unanswered(prompt, Outcome.ERROR, failure, message)
    agent.status = Outcome.ERROR
    agent.error_type = failure
    agent.status_message = message
    if agent is prompt.root:
        prompt.outcome = "error"


# The rule of each kind of note: each is the handler of the event classes its source's translator names
# (copilot_otel.sources.copilot.translator, .neutral).
NOTIFICATION: NoteRule[NotificationInput, Notification] = NoteRule(_notification, effect=_notified)
TASK_COMPLETE: NoteRule[TaskCompleteInput, TaskComplete] = NoteRule(_task_complete)
MODE_CHANGE: NoteRule[ModeChangeInput, ModeChange] = NoteRule(_mode_change, touch=False, effect=_mode)
WARNING: NoteRule[WarningInput, SessionWarning] = NoteRule(_warning)
TRUNCATION: NoteRule[TruncationInput, Truncation] = NoteRule(
    _truncation, touch=False, hand_on=_never, alone=False
)
SKILL: NoteRule[SkillInput, SkillInvoked] = NoteRule(
    _skill, place=_skill_place, touch=False, hand_on=_never, wait=_skill_waits
)
COMPACTION: NoteRule[CompactionInput, Compaction] = NoteRule(
    _compaction, place=_compaction_place, hand_on=lambda r: r.complete, follow=_compaction_call
)
ABORT: NoteRule[AbortInput, Abort] = NoteRule(_abort, settle=_aborted)
ERROR: NoteRule[ErrorInput, SessionError] = NoteRule(_error, place=_error_place, settle=_failed)
