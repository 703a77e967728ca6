"""Which agent's own vocabulary a session's spans carry beside the neutral ones, chosen by the agent that wrote it.

The GenAI, OpenInference, Langfuse and our own names are every agent's. A CLI's own names are only on its own
sessions' spans: ``github.copilot.*`` (:mod:`.copilot`) on Copilot CLI's, Claude Code's (:mod:`.claude_code`) on
Claude Code's, Codex CLI's (:mod:`.codex`) on Codex's; what the Copilot CLI's names said that no other vocabulary
does goes under the neutral names of :mod:`.neutral` for the others. A :class:`Vocabulary` is that choice, made once per session by the
:class:`~copilot_otel.projections.projector.Projector`, so a span costs one attribute lookup more, not a branch per
agent.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ..model.activity import (
    Abort,
    AgentRun,
    Compaction,
    ModelCall,
    PromptRun,
    SessionError,
    ToolCall,
    Turn,
    UserMessage,
)
from . import claude_code, codex, copilot, neutral, ours

# The agents the fold names (LoopState.agent): the values of ``copilot_otel.agent``.
COPILOT_AGENT: Final = "copilot"
CLAUDE_CODE_AGENT: Final = "claude-code"
CODEX_AGENT: Final = "codex"

_Attrs = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """An agent's own names, one function per record (each adds to a span's attributes, or returns a span
    event's), and the names of the prompt's span events.

    Attributes:
        agent: The agent (``copilot_otel.agent``); ``None`` when not said (the Copilot CLI's names, no agent
            attribute: the output of a projector built without one).
    """

    agent: str | None
    model_call: Callable[[_Attrs, ModelCall], None]
    tool_call: Callable[[_Attrs, ToolCall], None]
    turn: Callable[[_Attrs, Turn], None]
    agent_run: Callable[[_Attrs, AgentRun], None]
    prompt_run: Callable[[_Attrs, PromptRun], None]
    user_message: Callable[[UserMessage], _Attrs]
    abort: Callable[[Abort], _Attrs]
    compaction: Callable[[Compaction], _Attrs]
    error: Callable[[_Attrs, SessionError], None]
    user_message_event: str
    abort_event: str
    compaction_start_event: str
    compaction_complete_event: str
    turn_count: str  # the key of the main agent's (or a sub-agent's) turn count
    status_code: str  # the key of a failed request's HTTP status
    interaction_id: str | None  # the key of the CLI's interaction id, where it has one


def _copilot(agent: str | None) -> Vocabulary:
    return Vocabulary(
        agent,
        copilot.model_call,
        copilot.tool_call,
        copilot.turn,
        copilot.agent_run,
        copilot.prompt_run,
        copilot.user_message,
        copilot.abort,
        copilot.compaction,
        copilot.error,
        copilot.USER_MESSAGE_EVENT,
        copilot.ABORT_EVENT,
        copilot.COMPACTION_START_EVENT,
        copilot.COMPACTION_COMPLETE_EVENT,
        copilot.TURN_COUNT,
        copilot.ERROR_STATUS_CODE,
        copilot.INTERACTION_ID,
    )


def _neutral(agent: str, **own: Any) -> Vocabulary:
    """The neutral names, with what an agent's own vocabulary writes instead (``own``)."""
    names: dict[str, Any] = {
        "model_call": neutral.model_call,
        "tool_call": neutral.tool_call,
        "turn": neutral.turn,
        "agent_run": neutral.agent_run,
        "prompt_run": neutral.prompt_run,
        "user_message": neutral.user_message,
        "abort": neutral.abort,
        "compaction": neutral.compaction,
        "error": neutral.error,
        "user_message_event": ours.USER_MESSAGE_EVENT,
        "abort_event": ours.ABORT_EVENT,
        "compaction_start_event": ours.COMPACTION_START_EVENT,
        "compaction_complete_event": ours.COMPACTION_COMPLETE_EVENT,
        "turn_count": ours.AGENT_TURN_COUNT,
        "status_code": neutral.STATUS_CODE,
        "interaction_id": None,
    }
    names.update(own)
    return Vocabulary(agent=agent, **names)


COPILOT: Final = _copilot(None)
_BY_AGENT: Final = {
    COPILOT_AGENT: _copilot(COPILOT_AGENT),
    CLAUDE_CODE_AGENT: _neutral(
        CLAUDE_CODE_AGENT,
        model_call=claude_code.model_call,
        tool_call=claude_code.tool_call,
        user_message=claude_code.user_message,
        user_message_event=claude_code.USER_PROMPT_EVENT,
    ),
    CODEX_AGENT: _neutral(
        CODEX_AGENT,
        model_call=codex.model_call,
        tool_call=codex.tool_call,
        turn=codex.turn,
        agent_run=codex.agent_run,
        prompt_run=codex.prompt_run,
        user_message=codex.user_message,
        user_message_event=codex.USER_PROMPT_EVENT,
    ),
}


def vocabulary(agent: str | None) -> Vocabulary:
    """The vocabulary of ``agent``'s sessions: its own names where :mod:`.project` has them (Copilot CLI's, Claude
    Code's, Codex CLI's), the neutral ones for any other agent; ``None``: not said, the Copilot CLI's names without
    an agent attribute."""
    if agent is None:
        return COPILOT
    known = _BY_AGENT.get(agent)
    return known if known is not None else _other(agent)


@functools.cache
def _other(agent: str) -> Vocabulary:
    """An agent without names of its own (Gemini CLI): the neutral ones, made once (every log's projector asks)."""
    return _neutral(agent)
