"""Claude Code's own OpenTelemetry names, for the spans of sessions Claude Code wrote.

Kept so that queries written for Claude Code's native export (``CLAUDE_CODE_ENABLE_TELEMETRY``) read our spans
too. Spec: Claude Code's monitoring page (code.claude.com/docs/en/monitoring-usage): its ``claude_code.api_request``
event (``model``, ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_creation_tokens``,
``duration_ms``), its ``claude_code.tool_result`` event (``tool_name``, ``success``, ``duration_ms``,
``decision_type``) and its ``claude_code.user_prompt`` event; ``session.id`` is the semantic conventions' and
every span has it already. Nothing here is content (the export's opt-in ``prompt`` and ``tool_parameters`` are not
written: the content gate's captures go under the GenAI names, as for every agent).

Token counts mean what Claude Code's do: its ``input_tokens`` (Anthropic's) leaves the cached tokens out, where
``gen_ai.usage.input_tokens`` (the fold's meaning) counts them in.
"""

from __future__ import annotations

from typing import Any, Final

from ..model.activity import ModelCall, ToolCall, UserMessage
from . import neutral

USER_PROMPT_EVENT: Final = "claude_code.user_prompt"
MODEL: Final = "model"
INPUT_TOKENS: Final = "input_tokens"
OUTPUT_TOKENS: Final = "output_tokens"
CACHE_READ_TOKENS: Final = "cache_read_tokens"
CACHE_CREATION_TOKENS: Final = "cache_creation_tokens"
DURATION_MS: Final = "duration_ms"
TOOL_NAME: Final = "tool_name"
SUCCESS: Final = "success"
DECISION_TYPE: Final = "decision_type"


def _ms(start_ns: int, end_ns: int) -> float:
    return (end_ns - start_ns) / 1e6


def model_call(attrs: dict[str, Any], rec: ModelCall) -> None:
    """``claude_code.api_request``'s names; the neutral ones (:mod:`.neutral`) too."""
    neutral.model_call(attrs, rec)
    attrs[MODEL] = rec.model
    u = rec.usage
    if u.input is not None and u.cache_read is not None and u.cache_write is not None:
        attrs[INPUT_TOKENS] = u.input - u.cache_read - u.cache_write  # Anthropic's: without the cache's
    if u.output is not None:
        attrs[OUTPUT_TOKENS] = u.output
    if u.cache_read is not None:
        attrs[CACHE_READ_TOKENS] = u.cache_read
    if u.cache_write is not None:
        attrs[CACHE_CREATION_TOKENS] = u.cache_write
    attrs[DURATION_MS] = _ms(rec.start_ns, rec.end_ns)


def tool_call(attrs: dict[str, Any], rec: ToolCall) -> None:
    """``claude_code.tool_result``'s names: ``success`` a string as Claude Code writes it; ``decision_type``
    ``reject`` for a call a permission rule refused (it never ran), else ``accept``."""
    neutral.tool_call(attrs, rec)
    attrs[TOOL_NAME] = rec.name
    attrs[SUCCESS] = "true" if rec.success else "false"
    attrs[DURATION_MS] = _ms(rec.start_ns, rec.end_ns)
    attrs[DECISION_TYPE] = "reject" if rec.error_type == "denied" else "accept"


def user_message(rec: UserMessage) -> dict[str, Any]:
    """The attributes of the prompt's ``claude_code.user_prompt`` span event (its text only if captured, by
    :mod:`.ours`)."""
    return neutral.user_message(rec)
