"""Copilot CLI's translator: the loop's handler of each event class :mod:`copilot_otel.model.events` decodes.

The only part of the loop that lists Copilot's events; the entity modules hold what each handler does. Another
coding agent's log (issue "Beyond Copilot CLI") would bring a typed events module of its own and a translator
like this one over the same entities, rather than a loop of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..model import events as ev
from . import agents, notes, prompts, session, tools, turns
from .core import Translator

__all__ = ["COPILOT"]

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
        **notes.NOTES,
    },
    # What may follow a turn that ended unanswered without settling it: the error or abort that says why, and
    # hooks, warnings or a failed compaction written in between.
    keeps_unanswered=frozenset(
        {ev.SessionError, ev.Abort, ev.Compaction, ev.HookStart, ev.HookEnd, ev.SessionWarning}
    ),
    aside=session.read_imported,
)

if TYPE_CHECKING:  # Copilot's views are the loop's inputs as they are: mypy checks each against its protocol.
    from ..model import inputs

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
    ) -> None:
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
