"""Codex CLI's own OpenTelemetry names, for the spans of sessions Codex CLI wrote.

Kept so that queries written for Codex's native export (``[otel]`` in its ``config.toml``) read our spans too.
Spec: Codex's telemetry event catalog (openai/codex ``docs/config.md``, PR #2103): every event carries
``conversation.id`` (the thread), ``codex.sse_event`` the call's ``input_token_count``, ``output_token_count``,
``cached_token_count``, ``reasoning_token_count``, ``codex.tool_result`` the call's ``tool_name``, ``call_id``,
``duration_ms``, ``success``; ``codex.user_prompt`` names the prompt. Nothing here is content (the export's opt-in
``prompt``, ``arguments`` and ``output`` are not written: the content gate's captures go under the GenAI names).

Token counts mean what Codex's do, which is the fold's meaning too (OpenAI's input counts the cached tokens in,
its output the reasoning ones).
"""

from __future__ import annotations

from typing import Any, Final

from ..model.activity import AgentRun, ModelCall, PromptRun, ToolCall, Turn, UserMessage
from . import neutral

USER_PROMPT_EVENT: Final = "codex.user_prompt"
CONVERSATION_ID: Final = "conversation.id"
MODEL: Final = "model"
INPUT_TOKENS: Final = "input_token_count"
OUTPUT_TOKENS: Final = "output_token_count"
CACHED_TOKENS: Final = "cached_token_count"
REASONING_TOKENS: Final = "reasoning_token_count"
DURATION_MS: Final = "duration_ms"
TOOL_NAME: Final = "tool_name"
CALL_ID: Final = "call_id"
SUCCESS: Final = "success"


def model_call(attrs: dict[str, Any], rec: ModelCall) -> None:
    """``codex.sse_event``'s names (its completed response's counts); the neutral ones too."""
    neutral.model_call(attrs, rec)
    attrs[CONVERSATION_ID] = rec.session_id
    attrs[MODEL] = rec.model
    u = rec.usage
    for key, value in (
        (INPUT_TOKENS, u.input),
        (OUTPUT_TOKENS, u.output),
        (CACHED_TOKENS, u.cache_read),
        (REASONING_TOKENS, u.reasoning),
    ):
        if value is not None:
            attrs[key] = value
    attrs[DURATION_MS] = (rec.end_ns - rec.start_ns) / 1e6


def tool_call(attrs: dict[str, Any], rec: ToolCall) -> None:
    """``codex.tool_result``'s names, ``success`` a string as Codex writes it."""
    neutral.tool_call(attrs, rec)
    attrs[CONVERSATION_ID] = rec.session_id
    attrs[TOOL_NAME] = rec.name
    attrs[CALL_ID] = rec.call_id
    attrs[DURATION_MS] = (rec.end_ns - rec.start_ns) / 1e6
    attrs[SUCCESS] = "true" if rec.success else "false"


def turn(attrs: dict[str, Any], rec: Turn) -> None:
    neutral.turn(attrs, rec)
    attrs[CONVERSATION_ID] = rec.session_id


def agent_run(attrs: dict[str, Any], rec: AgentRun) -> None:
    neutral.agent_run(attrs, rec)
    attrs[CONVERSATION_ID] = rec.session_id


def prompt_run(attrs: dict[str, Any], rec: PromptRun) -> None:
    neutral.prompt_run(attrs, rec)
    attrs[CONVERSATION_ID] = rec.session_id


def user_message(rec: UserMessage) -> dict[str, Any]:
    """The attributes of the prompt's ``codex.user_prompt`` span event (its text only if captured, by
    :mod:`.ours`)."""
    return neutral.user_message(rec)
