"""Copilot CLI's translator: the loop's handler of each event class :mod:`.events` decodes.

The only place that pairs Copilot's events with the loop; the loop's entity modules hold what each handler does
and read an event through the protocols of :mod:`copilot_otel.model.inputs`, never by its class. The other
sources' framers give neutral events, whose translator is :data:`copilot_otel.loop.neutral.NEUTRAL`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...loop import agents, notes, prompts, session, tools, turns
from ...loop.core import LoopState, Translator
from ...model.inputs import Event
from . import events as ev

__all__ = ["COPILOT", "read_imported"]

# Events after which an imported transcript is over: a new CLI process, the end, a real turn.
_ENDS_IMPORT = frozenset({ev.SessionResume, ev.Shutdown, ev.TurnStart, ev.UserMessage, ev.UsageRecord})


def read_imported(loop: LoopState, event: Event) -> bool:
    """Whether ``event`` belongs to an imported transcript (``copilot sessions import``), and was counted: its
    messages and tools ran elsewhere, not as model calls or turns here. The first event of real work ends the
    imported part."""
    kind = event.__class__
    if kind is ev.UserMessage and event.interaction_id is None:
        key = "user_messages"
    elif kind is ev.AssistantMessage and event.interaction_id is None:
        key = "assistant_messages"
    elif kind is ev.ToolStart:
        key = "tool_calls"
    elif kind is ev.ToolComplete:
        return True
    else:
        if kind in _ENDS_IMPORT:
            session.end_imported(loop)
        return False
    session.count_imported(loop, key)
    return True


COPILOT = Translator(
    handlers={
        ev.SessionStart: session.on_session_start,
        ev.SessionResume: session.on_session_resume,
        ev.Shutdown: session.on_shutdown,
        ev.ContextChanged: session.on_context_changed,
        ev.ModelChange: session.on_model_change,
        ev.UsageRecord: turns.on_usage_record,
        ev.UserMessage: prompts.on_user_message,
        ev.SystemMessage: prompts.on_system_message,
        ev.Reasoning: turns.on_reasoning,
        ev.TurnStart: turns.on_turn_start,
        ev.TurnEnd: turns.on_turn_end,
        ev.AssistantMessage: turns.on_assistant_message,
        ev.ToolStart: tools.on_tool_start,
        ev.ToolComplete: tools.on_tool_complete,
        ev.ExternalToolRequested: tools.on_external_tool,
        ev.PermissionRequested: tools.on_permission_requested,
        ev.PermissionCompleted: tools.on_permission_completed,
        ev.HookStart: tools.on_hook_start,
        ev.HookEnd: tools.on_hook_end,
        ev.SubagentStarted: agents.on_subagent_started,
        ev.SubagentEnded: agents.on_subagent_end,
        ev.AgentSelected: agents.on_agent_selected,
        ev.SystemNotification: notes.NOTIFICATION,
        ev.TaskComplete: notes.TASK_COMPLETE,
        ev.ModeChanged: notes.MODE_CHANGE,
        ev.SessionWarning: notes.WARNING,
        ev.Truncation: notes.TRUNCATION,
        ev.SkillInvoked: notes.SKILL,
        ev.Compaction: notes.COMPACTION,
        ev.Abort: notes.ABORT,
        ev.SessionError: notes.ERROR,
    },
    # What may follow a turn that ended unanswered without settling it: the error or abort that says why, and
    # hooks, warnings or a failed compaction written in between.
    keeps_unanswered=frozenset(
        {ev.SessionError, ev.Abort, ev.Compaction, ev.HookStart, ev.HookEnd, ev.SessionWarning}
    ),
    aside=read_imported,
)

if TYPE_CHECKING:  # Copilot's views are the loop's inputs as they are: mypy checks each against its protocol.
    from ...model import inputs

    def _views_are_inputs(
        start: ev.SessionStart,
        message: ev.UserMessage,
        turn: ev.TurnStart,
        turn_end: ev.TurnEnd,
        usage: ev.UsageRecord,
        answer: ev.AssistantMessage,
        tool: ev.ToolStart,
        done: ev.ToolComplete,
        compaction: ev.Compaction,
        abort: ev.Abort,
        error: ev.SessionError,
        resume: ev.SessionResume,
        changed: ev.ContextChanged,
        model: ev.ModelChange,
        shutdown: ev.Shutdown,
        system: ev.SystemMessage,
        reasoning: ev.Reasoning,
        external: ev.ExternalToolRequested,
        asked: ev.PermissionRequested,
        answered: ev.PermissionCompleted,
        hook: ev.HookStart,
        hook_end: ev.HookEnd,
        spawned: ev.SubagentStarted,
        ended: ev.SubagentEnded,
        selected: ev.AgentSelected,
        notified: ev.SystemNotification,
        task: ev.TaskComplete,
        mode: ev.ModeChanged,
        warning: ev.SessionWarning,
        truncated: ev.Truncation,
        skill: ev.SkillInvoked,
    ) -> None:
        __: tuple[
            inputs.ResumeInput,
            inputs.ContextInput,
            inputs.ModelChangeInput,
            inputs.ShutdownInput,
            inputs.ContentInput,
            inputs.ContentInput,
            inputs.ExternalToolInput,
            inputs.PermissionRequestInput,
            inputs.PermissionAnswerInput,
            inputs.HookStartInput,
            inputs.HookEndInput,
            inputs.SubagentStartInput,
            inputs.SubagentEndInput,
            inputs.AgentSelectedInput,
            inputs.NotificationInput,
            inputs.TaskCompleteInput,
            inputs.ModeChangeInput,
            inputs.WarningInput,
            inputs.TruncationInput,
            inputs.SkillInput,
        ] = (resume, changed, model, shutdown, system, reasoning, external, asked, answered, hook, hook_end,
             spawned, ended, selected, notified, task, mode, warning, truncated, skill)  # fmt: skip
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
        ] = (start, message, turn, turn_end, usage, answer, tool, done, compaction, abort, error)
